#!/usr/bin/env bash
# Checks that every platform's requirements file (requirements-cuda12.txt, requirements-cuda13.txt,
# requirements-tpu.txt) resolves with constraints.txt's pins, without a GPU or TPU and without
# installing: `pip install --dry-run` on this machine's Python, reading each package's metadata
# (PEP 658 metadata files, else HTTP range requests into the wheel: --use-feature=fast-deps), not
# its wheels (gigabytes for the CUDA libraries). pip before 25.3 downloads every wheel of a dry run,
# so the check runs the PIP_VERSION below in a throwaway virtual environment. About 40 s a file.
#
#   bash tools/check_platform_requirements.sh            # exit 1 naming each file that does not resolve
set -uo pipefail
cd "$(dirname "$0")/.."
PIP_VERSION=26.3
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT
python3 -m venv "${scratch}/venv" && "${scratch}/venv/bin/pip" install -q "pip==${PIP_VERSION}" || {
  echo "error: could not set up pip ${PIP_VERSION} in a virtual environment under ${scratch}" >&2
  exit 1
}
status=0
for requirements in requirements-*.txt; do
  [[ ${requirements} == requirements-dev.txt ]] && continue
  if "${scratch}/venv/bin/pip" install --dry-run --quiet --quiet --use-feature=fast-deps \
      --report "${scratch}/report.json" -r "${requirements}"; then
    python3 - "${requirements}" "${scratch}/report.json" <<'PY'
import json, sys
installs = json.load(open(sys.argv[2]))["install"]
versions = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}
jax = sorted(f"{name} {version}" for name, version in versions.items() if name.startswith(("jax", "libtpu")))
print(f"{sys.argv[1]} resolves: {', '.join(jax)}")
PY
  else
    echo "error: ${requirements} does not resolve with constraints.txt (pip's error above)" >&2
    status=1
  fi
done
exit "${status}"
