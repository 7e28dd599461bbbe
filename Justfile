# Recipes run inside .venv (python3 bootstrap.py RECIPE sets it up).
set shell := ["bash", "-euo", "pipefail", "-c"]

state := env_var_or_default("ATTEST_STATE_DIR", ".attest-state")

# List the recipes.
default:
    @just --list

# The end-to-end demonstration on embedded defaults (a local key, a store under {{state}}).
demo:
    attest demo --state-dir {{state}}

# The whole test suite. pytest's exit 5 (no tests collected) is a failure, as every non-zero exit is.
test *ARGS:
    python -m pytest {{ARGS}}

# Performance figures against the standard tools, measured in the same run.
bench *ARGS:
    python -m bench {{ARGS}}
