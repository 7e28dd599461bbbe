# Recipes run inside .venv (python3 bootstrap.py RECIPE sets it up).
set shell := ["bash", "-euo", "pipefail", "-c"]

state := env_var_or_default("ATTEST_STATE_DIR", ".attest-state")

# List the recipes.
default:
    @just --list

# The end-to-end demonstration on embedded defaults (a local key, a store under {{state}}).
demo:
    attest demo --state-dir {{state}}

# Static checks: mypy --strict on the package, ruff on everything. Either failing fails CI.
check:
    mypy --strict attest
    ruff check .

# The static checks, then the whole test suite on two workers with the slowest durations.
# pytest's exit 5 (no tests collected) is a failure, as every non-zero exit is.
test *ARGS: check
    python -m pytest -n 2 --durations=15 {{ARGS}}

# Performance figures against the standard tools, measured in the same run.
bench *ARGS:
    python -m bench {{ARGS}}
