# The check of the shell tests, sourced by each (as tests/check.h is included by the C ones):
# `check DESCRIPTION COMMAND...` runs COMMAND, prints "ok: DESCRIPTION", or "FAIL: DESCRIPTION"
# on stderr and sets fail=1, which the test ends with (`exit $fail`).
fail=0
check() { if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1" >&2; fail=1; fi; }
