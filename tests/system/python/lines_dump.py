"""Dump line tables made by compile() for the line-table decoder tests.

    python lines_dump.py OUT

Writes, for every code object of a generated module (long functions, line
jumps over 127 and 255, multi-line expressions, loops, try/finally, lambdas,
comprehensions, classes):
    C <firstlineno> <table as hex>      (co_lnotab before 3.10, else co_linetable)
    E <position> <line>                 (one per instruction; 0 = no line)
where position is the byte offset (3.8, 3.9) or the code-unit index (3.10+),
and line is what CPython itself says (dis.findlinestarts / co_lines()).
"""
import dis
import sys

SRC = '''
def small(a, b):
    c = a + b
    return c

def jumps(x):
    y = 0
''' + "\n" * 140 + '''    y += x
''' + "\n" * 300 + '''    for i in range(x):
        if i % 2:
            y += i
        else:
            y -= (i *
                  2 +
                  x)
    try:
        y = y // x
    except ZeroDivisionError:
        y = -1
    finally:
        y += 1
    while y > 100:
        y -= 7
    return [v * 2 for v in range(y) if v] + list(map(lambda q: q + 1, [y]))

def long_body(n):
''' + "".join("    n = n * %d + %d\n" % (i, i) for i in range(1, 200)) + '''    return n

class K:
    attr = 1
    def method(self, z,
               w=3):
        return {k: z for k in range(w)}

async def coro(t):
    return t
'''


def codes(co):
    yield co
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            yield from codes(c)


def main():
    minor = sys.version_info[1]
    top = compile(SRC, "lines_src.py", "exec")
    with open(sys.argv[1], "w") as out:
        for co in codes(top):
            if minor < 10:
                table = co.co_lnotab
                starts = list(dis.findlinestarts(co))
                out.write("C %d %s\n" % (co.co_firstlineno, table.hex() or "-"))
                for off in range(0, len(co.co_code), 2):
                    line = co.co_firstlineno
                    for s, l in starts:
                        if s <= off:
                            line = l
                    out.write("E %d %d\n" % (off, line))
            else:
                table = co.co_linetable
                out.write("C %d %s\n" % (co.co_firstlineno, table.hex() or "-"))
                for start, end, line in co.co_lines():
                    for off in range(start, end, 2):
                        out.write("E %d %d\n" % (off // 2, line or 0))


main()
