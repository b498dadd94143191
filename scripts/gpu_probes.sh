#!/usr/bin/env bash
# Every GPU probe of the project in one run, on a machine with an NVIDIA GPU:
#
#   scripts/gpu_probes.sh HAMI_CORE_SOURCE_DIR [OUT_DIR]
#
# builds HAMi-core from its source with its own build.sh (a plain cmake build hooks nothing:
# docs/device-plugin.md), installs libvgpu.so at /usr/local/vgpu/libvgpu.so (where HAMi-core
# looks for itself), then runs scripts/nvml_probe.py, monitor_probe.py, plugin_probe.py and
# dra_probe.py with `python3` (vgpu and its `cluster` extra importable, e.g. PYTHONPATH=src plus
# the image's packages). Each probe's JSON report goes to OUT_DIR/<probe>.out, the logs to
# OUT_DIR/probes.err, the build's to OUT_DIR/build.log; one line per probe on stdout. Exit
# status: the number of probes that did not pass.
set -u
source_dir=${1:?usage: scripts/gpu_probes.sh HAMI_CORE_SOURCE_DIR [OUT_DIR]}
out=${2:-$(mktemp -d)}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
(cd "$source_dir" && rm -rf build \
  && CMAKE_OPTIONS=-DCMAKE_POLICY_VERSION_MINIMUM=3.5 J=$(nproc) bash ./build.sh) \
  >"$out/build.log" 2>&1 || { echo "HAMi-core did not build: $out/build.log"; exit 4; }
mkdir -p /usr/local/vgpu && cp "$source_dir/build/libvgpu.so" /usr/local/vgpu/libvgpu.so
lib=/usr/local/vgpu/libvgpu.so

failed=0
for probe in "nvml_probe --wait 5" "monitor_probe --libvgpu $lib --mib 256" \
             "plugin_probe --libvgpu $lib --limit-mib 1024" "dra_probe --libvgpu $lib --limit-mib 1024"; do
  name=${probe%% *}
  timeout 150 python3 "$repo/scripts/$name.py" ${probe#* } >"$out/$name.out" 2>>"$out/probes.err"
  code=$?
  verdict=$(grep -h "^$name: " "$out/$name.out" | tail -1)
  echo "$name: exit $code ${verdict#*: } (report: $out/$name.out)"
  [ "$code" -eq 0 ] || failed=$((failed + 1))
done
exit "$failed"
