#!/usr/bin/env bash
# Triton's kernel cache across device machines: every fresh machine compiles dak's kernels again
# (tests/test_split_attention_gpu.py: 4-5 minutes cold, 74 s warm on an H100 in the thirty-eighth
# session), and H100 and H200 share the same arch (sm_90) and software, so one cache serves both.
#   bash benchmarks/device_cache.sh restore   # first in a call: unpack .device-cache/triton-cache.tgz if carried
#   bash benchmarks/device_cache.sh pack      # last in a call: the cache as $OUT/triton-cache.tgz (if <= 15 MiB)
# Locally: copy the returned triton-cache.tgz into .device-cache/ (git-ignored) and pass
# carry=[".device-cache"] to later calls. Stale entries are harmless: Triton keys each kernel by its
# source, options, compiler and GPU, and compiles again on a miss.
set -u
cache="${TRITON_CACHE_DIR:-$HOME/.triton/cache}"
case "${1:-}" in
restore)
    if [ -f .device-cache/triton-cache.tgz ]; then
        mkdir -p "$cache" && tar xzf .device-cache/triton-cache.tgz -C "$cache" \
            && echo "device_cache: restored $(find "$cache" -type f | wc -l) files into $cache"
    else
        echo "device_cache: no .device-cache/triton-cache.tgz carried; kernels compile cold"
    fi
    ;;
pack)
    out="${OUT:?set OUT}/triton-cache.tgz"
    [ -d "$cache" ] || { echo "device_cache: no cache at $cache"; exit 0; }
    tar czf "$out" -C "$cache" .
    size=$(stat -c %s "$out")
    if [ "$size" -gt $((15 << 20)) ]; then
        rm -f "$out"
        echo "device_cache: the cache packs to $((size >> 20)) MiB, over the 16 MiB a returned file may have; not kept"
    else
        echo "device_cache: packed $(find "$cache" -type f | wc -l) files, $((size >> 10)) KiB, into $out"
    fi
    ;;
*)
    echo "usage: bash benchmarks/device_cache.sh restore|pack" >&2
    exit 2
    ;;
esac
