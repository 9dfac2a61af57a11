package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/probedbg/probe/output"
	"github.com/probedbg/probe/script"
)

// The man page and the shell completions are made from the help text
// (usageText), so that they cannot drift from it: docs/probe.1 is
// checked against manPage by TestManPageCurrent.

// helpSections splits the help into its command lines, the text between
// them and the flags, and the flags into one entry each.
type helpSections struct {
	commands []helpCommand
	spec     string // the paragraphs between the commands and the flags
	flags    []helpFlag
}

type helpCommand struct {
	synopsis []string // its lines, without "  probe " (continued: indented)
	text     string
}

type helpFlag struct {
	name string // "--format", "-o"
	arg  string // "F", "" for a switch
	text string // its lines, joined, the formats' table kept as lines
}

// helpColumn is the indent of the flags' text.
var helpColumn = strings.Repeat(" ", 28)

// flagLine is a flag's first line: its names ("-t, -tt, -ttt"), its
// argument, its text.
var flagLine = regexp.MustCompile(`^  (-{1,2}[a-zA-Z][a-zA-Z0-9-]*(?:, -{1,2}[a-zA-Z][a-zA-Z0-9-]*)*)( [A-Z]\S*)?\s{2,}(.*)$`)

func parseHelp(help string) helpSections {
	var h helpSections
	head, flags, _ := strings.Cut(help, "\nflags:\n")
	cmds, spec, _ := strings.Cut(strings.TrimPrefix(head, "usage:\n"), "\n\n")
	h.spec = strings.TrimSpace(spec)
	for _, line := range strings.Split(cmds, "\n") {
		switch {
		case strings.HasPrefix(line, "  probe "):
			if n := len(h.commands); n == 0 || h.commands[n-1].text != "" {
				h.commands = append(h.commands, helpCommand{})
			}
			c := &h.commands[len(h.commands)-1]
			c.synopsis = append(c.synopsis, strings.TrimPrefix(line, "  "))
		case strings.HasPrefix(line, "        ") && line[8] != ' ':
			c := &h.commands[len(h.commands)-1]
			c.text = strings.TrimSpace(c.text + " " + strings.TrimSpace(line))
		case strings.TrimSpace(line) != "": // a synopsis that goes on
			c := &h.commands[len(h.commands)-1]
			c.synopsis[len(c.synopsis)-1] += " " + strings.TrimSpace(line)
		}
	}
	for _, line := range strings.Split(strings.TrimRight(flags, "\n"), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			h.flags = append(h.flags, helpFlag{name: m[1], arg: strings.TrimSpace(m[2]), text: m[3]})
			continue
		}
		if len(h.flags) > 0 {
			f := &h.flags[len(h.flags)-1]
			f.text += "\n" + strings.TrimPrefix(line, helpColumn)
		}
	}
	return h
}

// roff escapes text for a man page: backslashes and leading dots.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// manPage is probe(1), in roff.
func manPage() string {
	h := parseHelp(usageText())
	var b strings.Builder
	b.WriteString(".\\\" Made by probe's cmd/probe/man.go from the help text; do not edit.\n")
	b.WriteString(".TH PROBE 1 \"\" \"probe\" \"User Commands\"\n")
	b.WriteString(".SH NAME\nprobe \\- kprobes, uprobes and ftrace for any process you may ptrace\n")
	b.WriteString(".SH SYNOPSIS\n")
	for _, c := range h.commands {
		for _, s := range c.synopsis {
			b.WriteString(".br\n\\fB" + roff(s) + "\\fR\n")
		}
	}
	b.WriteString(".SH DESCRIPTION\n")
	b.WriteString("probe places kprobe-style probes in Linux user processes through ptrace: " +
		"breakpoints at functions, offsets and addresses, one ftrace line a hit; " +
		"and runs ftrace's function tracers on them, with no kernel module, no eBPF and no rebuild.\n")
	for _, c := range h.commands {
		// Each synopsis a tag of its own, with no space between.
		for i, s := range c.synopsis {
			b.WriteString(".TP\n\\fB" + roff(s) + "\\fR\n")
			if i < len(c.synopsis)-1 {
				b.WriteString(".PD 0\n")
			} else if i > 0 {
				b.WriteString(".PD\n")
			}
		}
		b.WriteString(roff(c.text) + "\n")
	}
	b.WriteString(".PP\n")
	for _, para := range strings.Split(h.spec, "\n\n") {
		b.WriteString(roff(strings.Join(strings.Fields(para), " ")) + "\n.PP\n")
	}
	b.WriteString(".SH OPTIONS\n")
	for _, f := range h.flags {
		b.WriteString(".TP\n\\fB" + roff(f.name) + "\\fR")
		if f.arg != "" {
			b.WriteString(" \\fI" + roff(f.arg) + "\\fR")
		}
		b.WriteString("\n")
		if f.name == "--format" {
			// The formats' table keeps its lines.
			lines := strings.Split(f.text, "\n")
			b.WriteString(roff(lines[0]) + "\n.nf\n")
			for _, l := range lines[1:] {
				b.WriteString(roff(l) + "\n")
			}
			b.WriteString(".fi\n")
			continue
		}
		b.WriteString(roff(strings.Join(strings.Fields(f.text), " ")) + "\n")
	}
	b.WriteString(".SH EXIT STATUS\n0 on success, 2 on bad input (one line on standard error naming the bad token; " +
		"nothing is installed), 1 on a failure while tracing. probe run exits with the program's status.\n")
	b.WriteString(".SH SEE ALSO\nREADME.md and docs/ in probe's source; \\fBuftrace\\fR(1), \\fBltrace\\fR(1), \\fBperf\\-probe\\fR(1), \\fBbpftrace\\fR(8)\n")
	return b.String()
}

// commandNames are the commands, as the first word after probe.
func commandNames(h helpSections) []string {
	seen := map[string]bool{}
	var names []string
	for _, c := range h.commands {
		for _, s := range c.synopsis {
			for _, name := range strings.Split(strings.Fields(s)[1], "|") {
				if !seen[name] && !strings.HasPrefix(name, "-") {
					seen[name] = true
					names = append(names, name)
				}
			}
		}
	}
	return append(names, "help")
}

// completion is the completion script of a shell: bash, zsh or fish.
func completion(shell string) (string, error) {
	h := parseHelp(usageText())
	var flags, fileFlags []string
	for _, f := range h.flags {
		flags = append(flags, f.name)
		if strings.Contains(f.arg, "FILE") {
			fileFlags = append(fileFlags, f.name)
		}
	}
	formats := output.FormatsWhere(func(*output.Format) bool { return true })
	cmds := commandNames(h)
	switch shell {
	case "bash", "zsh":
		var b strings.Builder
		if shell == "zsh" {
			b.WriteString("autoload -U +X bashcompinit && bashcompinit\n")
		}
		fmt.Fprintf(&b, `_probe() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	case $prev in
	--format) COMPREPLY=($(compgen -W %q -- "$cur")); return ;;
	--tracer) COMPREPLY=($(compgen -W %q -- "$cur")); return ;;
	%s) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	esac
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
	elif [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -F _probe probe
`, strings.Join(formats, " "), strings.Join(script.Tracers, " "), strings.Join(fileFlags, "|"),
			strings.Join(append(cmds, "--version"), " "), strings.Join(flags, " "))
		return b.String(), nil
	case "fish":
		var b strings.Builder
		b.WriteString("complete -c probe -f\n")
		fmt.Fprintf(&b, "complete -c probe -n __fish_use_subcommand -a '%s'\n", strings.Join(cmds, " "))
		b.WriteString("complete -c probe -n __fish_use_subcommand -l version\n")
		for _, f := range h.flags {
			opt := "-l " + strings.TrimPrefix(f.name, "--")
			if !strings.HasPrefix(f.name, "--") {
				opt = "-s " + strings.TrimPrefix(f.name, "-")
			}
			switch {
			case f.name == "--format":
				opt += " -xa '" + strings.Join(formats, " ") + "'"
			case f.name == "--tracer":
				opt += " -xa '" + strings.Join(script.Tracers, " ") + "'"
			case strings.Contains(f.arg, "FILE"):
				opt += " -rF"
			case f.arg != "":
				opt += " -x"
			}
			desc := strings.ReplaceAll(strings.SplitN(f.text, "\n", 2)[0], "'", `\'`)
			fmt.Fprintf(&b, "complete -c probe %s -d '%s'\n", opt, desc)
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("completion: unknown shell %q (want bash, zsh or fish)", shell)
}
