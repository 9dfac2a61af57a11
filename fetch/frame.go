package fetch

import "regexp"

// frameText matches a Frame's Text: "sym+0xoff/0xsize [module]".
var frameText = regexp.MustCompile(`^(.*?)\+0x[0-9a-f]+(/0x[0-9a-f]+)?( \[.*\])?$`)

// FrameFunc is the function of a frame's text (Frame.Text, or a stack
// kept as text): "sym" of "sym+0xoff/0xsize [module]"; the text itself
// when it names none ("0x...").
func FrameFunc(text string) string {
	if m := frameText.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return text
}
