#!/usr/bin/env bash
# Guard for a fresh machine: fails, naming the package, when the build in BUILD (default build)
# used a file of a Debian package that the set-up neither names (the pkgs list of
# scripts/install_deps.sh, or the list file given as PACKAGE_LIST) nor
# pulls in through Depends, and that a minimal Debian system (Essential or Priority: required)
# lacks. What the build used is read from the build itself: CMake's cache (found files and package
# configs), the compiler's recorded header dependencies (ninja -t deps) and the link lines.
#   check_build_deps.sh [BUILD [PACKAGE_LIST]]
set -euo pipefail
build="${1:-build}"
list="${2:-}"
command -v dpkg-query >/dev/null && command -v apt-cache >/dev/null || {
  echo "check_build_deps: not a Debian system (no dpkg/apt-cache); skipped"; exit 0; }
[ -f "$build/CMakeCache.txt" ] || { echo "check_build_deps: no $build/CMakeCache.txt (build first)" >&2; exit 2; }

# Files under /usr the build read: cache entries (a *_DIR entry stands for the config files in
# it), headers the compiler recorded, and libraries on link lines.
used_files() {
  grep -E '^[A-Za-z0-9_.+-]+:(FILEPATH|PATH|STRING)=/usr/' "$build/CMakeCache.txt" | sed 's/^[^=]*=//' | tr ';' '\n' |
    while read -r f; do
      if [ -d "$f" ]; then find "$f" -maxdepth 1 -name '*onfig*.cmake' 2>/dev/null; else echo "$f"; fi
    done
  ninja -C "$build" -t deps 2>/dev/null | grep -oE '^ +/usr/[^ ]+' | sed 's/^ *//'
  ninja -C "$build" -t commands 2>/dev/null | grep -oE '/usr/[^ ]+\.(so|a)(\.[0-9.]+)?' || true
}
files=$(used_files | sort -u)
# Both the names used and what they resolve to (a package may own either).
paths=$( { printf '%s\n' $files; printf '%s\n' $files | xargs -r realpath -e -q 2>/dev/null || true; } | sort -u |
         xargs -r -d '\n' ls -d 2>/dev/null | sort -u || true)
# The owning packages, from dpkg's file lists (one pass; files of no package, such as
# /usr/local's, are not ours to check). Prints "package path" per owned file.
owners() {
  awk 'NR == FNR { want[$0] = 1; next }
       ($0 in want) { f = FILENAME; sub(/.*\//, "", f); sub(/\.list$/, "", f); sub(/:[a-z0-9]+$/, "", f); print f, $0 }' \
    <(printf '%s\n' $paths) /var/lib/dpkg/info/*.list
}
owned=$(owners | sort -u)
used=$(echo "$owned" | cut -d' ' -f1 | sort -u)

if [ -n "$list" ]; then
  named=$(sed 's/#.*//; /^[[:space:]]*$/d' "$list")
else  # the set-up's own list: its pkgs=( ... ) lines
  list="scripts/install_deps.sh"
  named=$(sed -n '/^pkgs=(/,/)/p' "$(dirname "$0")/install_deps.sh" | sed 's/pkgs=//' | tr -d '()' | tr ' \t' '\n\n' | grep -v '^$')
fi
provided=$( { apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
                --no-replaces --no-enhances $named 2>/dev/null | grep -v '^ ' | tr -d '<>'
              dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' | awk '$2 == "yes" || $3 == "required" {print $1}'
            } | sed 's/:[a-z0-9]*$//' | sort -u)
missing=$(comm -23 <(echo "$used") <(echo "$provided"))
if [ -n "$missing" ]; then
  echo "check_build_deps: the build uses Debian packages that $list does not install (a fresh machine lacks them):"
  for p in $missing; do
    echo "  $p (for $(echo "$owned" | awk -v p="$p" '$1 == p {print $2}' | head -n 3 | paste -sd' '))"
  done
  exit 1
fi
echo "check_build_deps: the $(echo "$used" | wc -l) Debian packages the build uses are all installed by the set-up or part of a minimal system"
