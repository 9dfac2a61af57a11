/* TestCallsUnknown's library, built without DWARF: a function no
 * prototype table knows either. */
int mystery(int a, int b)
{
	return a * b + 1;
}
