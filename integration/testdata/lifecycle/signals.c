// signals: SIGUSR1 and SIGALRM handlers under load, with probed code in
// and out of the handlers. Every signal is waited for before the next is
// sent, so the counts are exact and the same traced or not.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t usr1, alrm;

__attribute__((noinline)) int work(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noinline)) void handled(int sig)
{
	__asm__ volatile("" ::: "memory");
	if (sig == SIGUSR1)
		usr1++;
	else
		alrm++;
}

static void on_signal(int sig) { handled(sig); }

static pthread_t main_thread;
static int rounds;

// sender signals the main thread while it runs probed code.
static void *sender(void *arg)
{
	for (int i = 0; i < rounds; i++) {
		sig_atomic_t before = usr1;
		pthread_kill(main_thread, SIGUSR1);
		while (usr1 == before)
			;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atoi(argv[1]) : 2000;
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);
	main_thread = pthread_self();
	pthread_t s;
	pthread_create(&s, NULL, sender, NULL);
	long calls = 0;
	while (usr1 < rounds) {
		work(calls);
		calls++;
	}
	pthread_join(s, NULL);
	for (int i = 0; i < rounds / 10; i++) {
		sig_atomic_t before = alrm;
		struct itimerval it = {.it_value = {0, 200}};
		setitimer(ITIMER_REAL, &it, NULL);
		while (alrm == before)
			work(-1);
	}
	printf("usr1 %d alrm %d\n", (int)usr1, (int)alrm);
	return 0;
}
