# Recipes run inside .venv (python3 bootstrap.py RECIPE sets it up).
set shell := ["bash", "-euo", "pipefail", "-c"]

state := env_var_or_default("ATTEST_STATE_DIR", ".attest-state")
review_dir := env_var_or_default("ATTEST_REVIEW_DIR", "review-out")
backend := env_var_or_default("ATTEST_BACKEND", "immutable")
reviewer := env_var_or_default("ATTEST_REVIEWER", 'exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review stand-in')

# List the recipes.
default:
    @just --list

# The end-to-end demonstration on embedded defaults (a local key, a store under {{state}}).
demo:
    attest demo --state-dir {{state}}

# HOST is `--identity FILE` or `--github OWNER/NAME --pr N`. The deployment's files come from the
# environment, never from the repository under review: ATTEST_PINS, ATTEST_TRUST, ATTEST_SKILL,
# ATTEST_INSTALLATION, ATTEST_KEY (required); ATTEST_REVIEWER (a /bin/sh command line; default the
# stand-in reviewer of the runtime image), ATTEST_REVIEW_DIR (handoff and result; default
# review-out), ATTEST_BACKEND (default immutable).
# REPO and HOST reach attest as arguments, never as shell text.
# The trusted review of a pull request: `attest bootstrap`, then the reviewer from the four frozen images only.
[positional-arguments]
verify REPO *HOST:
    mkdir -p -m 700 {{quote(review_dir)}}
    attest bootstrap --pins {{quote(env_var('ATTEST_PINS'))}} --policy {{quote(env_var('ATTEST_TRUST'))}} \
        --state-dir {{quote(state)}} --skill {{quote(env_var('ATTEST_SKILL'))}} \
        --installation {{quote(env_var('ATTEST_INSTALLATION'))}} --repo "$1" "${@:2}" \
        --key {{quote(env_var('ATTEST_KEY'))}} --backend {{quote(backend)}} -o {{quote(review_dir / "handoff.json")}}
    attest review exec --handoff {{quote(review_dir / "handoff.json")}} --policy {{quote(env_var('ATTEST_TRUST'))}} \
        --state-dir {{quote(state)}} -o {{quote(review_dir / "result.json")}} -- /bin/sh -c {{quote(reviewer)}}

# Static checks: mypy --strict on the package, ruff on everything. Either failing fails CI.
check:
    mypy --strict attest
    ruff check .

# pytest's exit 5 (no tests collected) is a failure, as every non-zero exit is.
# The static checks, then the whole test suite on two workers with the slowest durations.
test *ARGS: check
    python -m pytest -n 2 --durations=15 {{ARGS}}

# Performance figures against the standard tools, measured in the same run.
bench *ARGS:
    python -m bench {{ARGS}}
