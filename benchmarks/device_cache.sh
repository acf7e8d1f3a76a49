#!/usr/bin/env bash
# Triton's kernel cache across device machines: every fresh machine compiles dak's kernels again
# (tests/test_split_attention_gpu.py: 4-5 minutes cold, 74 s warm on an H100 in the thirty-eighth
# session), and H100 and H200 share the same arch (sm_90) and software, so one cache serves both.
#   bash benchmarks/device_cache.sh restore   # first in a call: unpack .device-cache/triton-cache.tgz.* if carried
#   bash benchmarks/device_cache.sh pack      # last in a call: the cache as $OUT/triton-cache.tgz.00, .01, ...
#                                             # (15 MiB parts: a returned file may have 16 MiB; at most 3 parts)
# Locally: copy the returned triton-cache.tgz.* into .device-cache/ (git-ignored) and pass
# carry=[".device-cache"] to later calls. Stale entries are harmless: Triton keys each kernel by its
# source, options, compiler and GPU, and compiles again on a miss.
set -u
cache="${TRITON_CACHE_DIR:-$HOME/.triton/cache}"
case "${1:-}" in
restore)
    if ls .device-cache/triton-cache.tgz.* >/dev/null 2>&1; then
        mkdir -p "$cache" && cat .device-cache/triton-cache.tgz.* | tar xz -C "$cache" \
            && echo "device_cache: restored $(find "$cache" -type f | wc -l) files into $cache"
    else
        echo "device_cache: no .device-cache/triton-cache.tgz.* carried; kernels compile cold"
    fi
    ;;
pack)
    out="${OUT:?set OUT}/triton-cache.tgz"
    [ -d "$cache" ] || { echo "device_cache: no cache at $cache"; exit 0; }
    tar czf "$out" -C "$cache" .
    size=$(stat -c %s "$out")
    if [ "$size" -gt $((45 << 20)) ]; then
        rm -f "$out"
        echo "device_cache: the cache packs to $((size >> 20)) MiB, over the 3 x 15 MiB kept; not kept"
    else
        split -b 15M -d -a 2 "$out" "$out." && rm -f "$out"
        echo "device_cache: packed $(find "$cache" -type f | wc -l) files, $((size >> 10)) KiB, into $(ls "$out".* | wc -l) parts $out.*"
    fi
    ;;
*)
    echo "usage: bash benchmarks/device_cache.sh restore|pack" >&2
    exit 2
    ;;
esac
