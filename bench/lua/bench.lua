-- A Lua workload of ~390,000 C function calls in the interpreter: Lua
-- calls, table stores and string building. Prints its result on stdout
-- and, on stderr, the CPU time it took (os.clock), in milliseconds.
local t0 = os.clock()
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t = {}
for i = 1, 2000 do t[i] = tostring(i) .. "x" end
local s = 0
for i = 1, 40 do s = s + fib(15) + #table.concat(t, ",", 1, 100) end
io.stderr:write(string.format("lua_ms=%.3f\n", (os.clock() - t0) * 1000))
print(s)
