#!/usr/bin/env bash
# Triton's kernel cache across device machines: every fresh machine compiles dak's kernels again
# (tests/test_split_attention_gpu.py: 4-5 minutes cold, 74 s warm on an H100 in the thirty-eighth
# session), and H100 and H200 share the same arch (sm_90) and software, so one cache serves both.
#   bash benchmarks/device_cache.sh restore   # first in a call: unpack .device-cache/triton-cache.tgz.* if carried
#   bash benchmarks/device_cache.sh pack      # last in a call: the cache as $OUT/triton-cache.tgz.00, .01, ...
#                                             # (15 MiB parts: a returned file may have 16 MiB; at most 3 parts),
#                                             # and small enough to carry back beside the working tree
# Locally: copy the returned triton-cache.tgz.* into .device-cache/ (git-ignored) and pass
# carry=[".device-cache"] to later calls. Stale entries are harmless: Triton keys each kernel by its
# source, options, compiler and GPU, and compiles again on a miss.
# dak's nvcc-built cubins (the multicast host kernel, dak.kernels.host_multicast: keyed by source, flags and
# nvcc version, a few seconds of nvcc each) ride in the same archive as dak-cubins/ and are restored into
# dak's default cache, ~/.cache/dak/cuda; h200_next.sh links its $DAK_CACHE_DIR/cuda there.
set -u
cache="${TRITON_CACHE_DIR:-$HOME/.triton/cache}"
cubins="$HOME/.cache/dak/cuda"
case "${1:-}" in
restore)
    if ls .device-cache/triton-cache.tgz.* >/dev/null 2>&1; then
        mkdir -p "$cache" && cat .device-cache/triton-cache.tgz.* | tar xz -C "$cache" \
            && echo "device_cache: restored $(find "$cache" -type f | wc -l) files into $cache"
        touch "$cache/.dak-restored"  # pack keeps this call's compiles first when the whole cache is too big
        if ls "$cache"/dak-cubins/*.cubin >/dev/null 2>&1; then
            mkdir -p "$cubins" && cp -p "$cache"/dak-cubins/*.cubin "$cubins"/ \
                && echo "device_cache: restored $(ls "$cache"/dak-cubins/*.cubin | wc -l) cubins into $cubins"
        fi
    else
        echo "device_cache: no .device-cache/triton-cache.tgz.* carried; kernels compile cold"
    fi
    ;;
pack)
    out="${OUT:?set OUT}/triton-cache.tgz"
    # At most 45 MiB (3 returned parts), and what a later call can carry: the working tree plus carried paths
    # must stay under 64 MiB (forty-seventh session: a 41 MiB cache beside a 33 MiB tree was refused). The tree
    # is measured here as git counts it (tracked and untracked-not-ignored files), with 2 MiB to spare;
    # $DAK_CACHE_PACK_MIB overrides.
    tree=$(git ls-files -coz --exclude-standard 2>/dev/null | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    room=$(( ((62 << 20) - ${tree:-0}) >> 20 ))
    limit=$(( ${DAK_CACHE_PACK_MIB:-$(( room < 45 ? room : 45 ))} << 20 ))
    [ "$limit" -gt 0 ] || { echo "device_cache: the working tree leaves no room to carry a cache; not packed"; exit 0; }
    [ -d "$cache" ] || { echo "device_cache: no cache at $cache"; exit 0; }
    if ls "$cubins"/*.cubin >/dev/null 2>&1; then
        mkdir -p "$cache/dak-cubins" && cp -p "$cubins"/*.cubin "$cache/dak-cubins/" && touch "$cache/dak-cubins"
    fi
    tar czf "$out" --exclude=./.dak-restored -C "$cache" .
    size=$(stat -c %s "$out")
    if [ "$size" -gt "$limit" ]; then
        # Too big (forty-sixth session: a restored cache plus a call's compiles packed to 50 MiB). Keep the
        # entries this call compiled (newer than the restore), then restored ones newest first, as many as
        # fit a raw-size budget scaled by the whole cache's compression ratio, with 10% to spare.
        raw=$(du -sk --exclude=.dak-restored "$cache" | cut -f1)
        budget=$(( raw * (limit >> 10) / (size >> 10) * 9 / 10 ))
        entries() { find "$cache" -mindepth 1 -maxdepth 1 -type d "$@" -printf '%T@ %f\n' | sort -rn; }
        if [ -e "$cache/.dak-restored" ]; then
            entries -newer "$cache/.dak-restored"; entries ! -newer "$cache/.dak-restored"
        else
            entries
        fi | cut -d' ' -f2 | while read -r d; do
            kb=$(du -sk "$cache/$d" | cut -f1); used=$(( ${used:-0} + kb ))
            [ "$used" -le "$budget" ] && echo "./$d"
        done >"$out.list"
        tar czf "$out" -C "$cache" -T "$out.list"
        size=$(stat -c %s "$out")
        echo "device_cache: the whole cache packs over $((limit >> 20)) MiB (the tree: $((tree >> 20)) MiB); kept $(wc -l <"$out.list") of $(find "$cache" -mindepth 1 -maxdepth 1 -type d | wc -l) entries (this call's compiles first)"
        rm -f "$out.list"
    fi
    if [ "$size" -gt "$limit" ]; then
        rm -f "$out"
        echo "device_cache: the cache packs to $((size >> 20)) MiB, over the $((limit >> 20)) MiB it may take; not kept"
    else
        split -b 15M -d -a 2 "$out" "$out." && rm -f "$out"
        echo "device_cache: packed $((size >> 10)) KiB into $(ls "$out".* | wc -l) parts $out.*"
    fi
    ;;
*)
    echo "usage: bash benchmarks/device_cache.sh restore|pack" >&2
    exit 2
    ;;
esac
