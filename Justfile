# Recipes run inside .venv (python3 bootstrap.py RECIPE sets it up).
set shell := ["bash", "-euo", "pipefail", "-c"]
# Recipes do not echo their lines (verify's are long shell); the checks and tests do ([no-quiet]).
set quiet

# Relative paths are the caller's: `verify` runs in the directory just was called from.
state := env_var_or_default("ATTEST_STATE_DIR", ".attest-state")
review_dir := env_var_or_default("ATTEST_REVIEW_DIR", "review-out")
# This checkout's attest and Python by absolute path (bootstrap.py makes .venv), else PATH's.
venv_bin := justfile_directory() / ".venv" / "bin"
attest := if path_exists(venv_bin / "attest") == "true" { venv_bin / "attest" } else { "attest" }
python := if path_exists(venv_bin / "python") == "true" { venv_bin / "python" } else { "python3" }
backend := env_var_or_default("ATTEST_BACKEND", "immutable")
reviewer_image := env_var_or_default("ATTEST_REVIEWER_IMAGE", "")
reviewer_attestation := env_var_or_default("ATTEST_REVIEWER_ATTESTATION", "")
reviewer_env := env_var_or_default("ATTEST_REVIEWER_ENV", "")
reviewer_network := env_var_or_default("ATTEST_REVIEWER_NETWORK", "")
reviewer := env_var_or_default("ATTEST_REVIEWER", if reviewer_image != "" { 'exec "$ATTEST_IMAGE_REVIEWER/bin/review"' } else { 'exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review stand-in' })
semantic := env_var_or_default("ATTEST_SEMANTIC", "docs/review/policy-context.md")
adapter := env_var_or_default("ATTEST_ADAPTER", "docs/review/github-review.json")

# List the recipes.
default:
    @just --list

# The end-to-end demonstration on embedded defaults (a local key, a store in $ATTEST_STATE_DIR, default .attest-state).
demo:
    attest demo --state-dir {{state}}

# HOST is `--identity FILE` or `--github OWNER/NAME --pr N`. The deployment's files come from the
# environment, never from the repository under review: ATTEST_PINS, ATTEST_TRUST, ATTEST_SKILL,
# ATTEST_INSTALLATION, ATTEST_KEY (required); ATTEST_REVIEWER_IMAGE and ATTEST_REVIEWER_ATTESTATION
# (the deployment's frozen reviewer image, sha256:<hex>, and its signed attestation), ATTEST_REVIEWER
# (a /bin/sh command line; default the image's bin/review, or without an image the stand-in reviewer
# of the runtime image), ATTEST_REVIEWER_ENV (names of variables the reviewer gets, space-separated),
# ATTEST_REVIEWER_NETWORK (non-empty: the host's network), ATTEST_SEMANTIC and ATTEST_ADAPTER (the two projections
# of the trusted base; defaults below), ATTEST_REVIEW_DIR (handoff, result, payload and record;
# default review-out in the caller's directory), ATTEST_STATE_DIR (default .attest-state there),
# ATTEST_BACKEND (default immutable). Relative paths are the caller's; a failing step prints its reason.
# REPO and HOST reach attest as arguments, never as shell text.
# (serialize rechecks again immediately before it writes.)

# The trusted review of a pull request: bootstrap, start, the reviewer from four frozen images, recheck, serialize.
[positional-arguments]
[no-cd]
verify REPO *HOST:
    missing=(); for name in ATTEST_PINS ATTEST_TRUST ATTEST_SKILL ATTEST_INSTALLATION ATTEST_KEY; do \
        [ -n "${!name:-}" ] || missing+=("$name"); done; \
    if [ "${#missing[@]}" -gt 0 ]; then echo "just verify: set ${missing[*]}: the deployment's files (docs/review.md, \"just verify\")" >&2; exit 2; fi
    mkdir -p -m 700 {{quote(review_dir)}}
    {{quote(attest)}} bootstrap --pins "$ATTEST_PINS" --policy "$ATTEST_TRUST" \
        --state-dir {{quote(state)}} --skill "$ATTEST_SKILL" \
        --installation "$ATTEST_INSTALLATION" --repo "$1" "${@:2}" \
        --key "$ATTEST_KEY" --backend {{quote(backend)}} -o {{quote(review_dir / "handoff.json")}}
    {{quote(attest)}} review start --handoff {{quote(review_dir / "handoff.json")}} --policy "$ATTEST_TRUST" \
        --state-dir {{quote(state)}} --repo "$1" "${@:2}" --semantic {{quote(semantic)}} --adapter {{quote(adapter)}} \
        --json > {{quote(review_dir / "start.json")}} || { \
        {{quote(python)}} -c 'import json, sys; sys.stderr.write("attest review start failed:\n" + "".join("  %s: %s\n" % (e["code"], e["detail"]) for e in json.load(open(sys.argv[1]))["errors"]))' {{quote(review_dir / "start.json")}}; \
        exit 1; }
    review="$({{quote(python)}} -c 'import json, sys; print(json.load(open(sys.argv[1]))["review"])' {{quote(review_dir / "start.json")}})"; \
    extra=(); \
    if [ -n {{quote(reviewer_image)}} ]; then extra+=(--reviewer {{quote(reviewer_image)}} --reviewer-attestation {{quote(reviewer_attestation)}}); fi; \
    read -ra names <<< {{quote(reviewer_env)}}; for name in "${names[@]}"; do extra+=(--env "$name"); done; \
    if [ -n {{quote(reviewer_network)}} ]; then extra+=(--network); fi; \
    {{quote(attest)}} review exec --handoff {{quote(review_dir / "handoff.json")}} --policy "$ATTEST_TRUST" \
        --state-dir {{quote(state)}} --review "$review" -o {{quote(review_dir / "result.json")}} "${extra[@]}" \
        -- /bin/sh -c {{quote(reviewer)}}; \
    {{quote(attest)}} review recheck --state-dir {{quote(state)}} --review "$review"; \
    {{quote(attest)}} review serialize --state-dir {{quote(state)}} --review "$review" --result {{quote(review_dir / "result.json")}} \
        --key "$ATTEST_KEY" -o {{quote(review_dir / "payload.json")}} --record {{quote(review_dir / "record.json")}}

# Static checks: mypy --strict on the package, ruff on everything. Either failing fails CI.
[no-quiet]
check:
    mypy --strict attest
    ruff check .

# pytest's exit 5 (no tests collected) is a failure, as every non-zero exit is.
# Three workers on two cores: the tests wait on processes and the disk about a tenth of the time (measured 459 s
# against 498 s with two). Whole files each, longest first (tests/conftest.py).

# The static checks, then the whole test suite on three workers, longest files first, with the ten slowest durations.
[no-quiet]
test *ARGS: check-and-collect
    python -m pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=10 {{ARGS}}

# The fast tier: every test but the `slow` ones (a real promotion, the demo, a confined reviewer). CI runs them all.
[no-quiet]
test-fast *ARGS: check-and-collect
    python -m pytest -n 3 --dist loadfile --no-loadscope-reorder -m "not slow" --durations=10 {{ARGS}}

# `check`, while one pytest process collects every test module and caches its assertion-rewritten bytecode
# (tests/**/__pycache__). Each worker then reads that cache instead of rewriting ~270 modules itself: 8-10 s of one
# core each, and where PYTHONDONTWRITEBYTECODE is set (as on CI) no worker would ever write the cache. A collection
# error is not reported here: the run itself reports it.
[private]
check-and-collect:
    PYTHONDONTWRITEBYTECODE= python -m pytest --collect-only -q -p no:cacheprovider > /dev/null 2>&1 & collecting=$!; \
    {{quote(just_executable())}} -f {{quote(justfile())}} check || { status=$?; kill "$collecting" 2> /dev/null; wait "$collecting" || true; exit "$status"; }; \
    wait "$collecting" || true

# Performance figures against the standard tools, measured in the same run.
[no-quiet]
bench *ARGS:
    python -m bench {{ARGS}}
