"""Known-bad: does not parse. Expected: import_error."""
BACKEND = "torch"

def solve(a, b)
    return a @ b
