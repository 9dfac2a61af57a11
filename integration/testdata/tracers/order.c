/* order: lines of its own among calls the trace shows (puts, then a
 * printf per line), for the trace and the program sharing a terminal. */
#include <stdio.h>
#include <string.h>

int main(void)
{
	char buf[32];
	for (int i = 0; i < 5; i++) {
		snprintf(buf, sizeof buf, "word%d", i);
		printf("line %zu\n", strlen(buf) + i);
	}
	return 0;
}
