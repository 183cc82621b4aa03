#!/usr/bin/env bash
# Builds grove's Debian package: target/debian/grove_VERSION_ARCH.deb.
#
#   deploy/build-deb.sh                  # the release build (what operators install)
#   deploy/build-deb.sh --profile dev    # CI: packages the dev binary its tests built
#
# Needs cargo, dpkg-deb and dpkg-shlibdeps (dpkg-dev), strip (binutils) and
# gzip. The binary is stripped, then it generates its own man pages and
# completions (`grove manpages DIR`, `grove completions SHELL`), so they come
# from the same CLI definition as the binary. docs/packaging.md describes the
# layout and what lintian says about it.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile="$2"; shift 2 ;;
        --profile=*) profile="${1#--profile=}"; shift ;;
        *) echo "usage: deploy/build-deb.sh [--profile release|dev|NAME]" >&2; exit 2 ;;
    esac
done
case "$profile" in
    dev) profile_dir=debug ;;
    *) profile_dir="$profile" ;;
esac
target="${CARGO_TARGET_DIR:-target}"

cargo build --quiet --profile "$profile" --bin grove
bin="$target/$profile_dir/grove"

version="$("$bin" --version | awk '{print $2}')"
arch="$(dpkg --print-architecture)"
# Every file's time and the changelog's date: the last commit's, so the same
# commit gives the same package contents.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

out="$target/debian"
root="$out/grove_${version}_${arch}"
rm -rf "$root"
mkdir -p "$root/DEBIAN"
umask 022

install -D -m 0755 "$bin" "$root/usr/bin/grove"
# llama.cpp's libraries (libllama, libggml, libggml-base, and one CPU
# backend per x86 variant, which llama.cpp picks from at run time): the
# build leaves them beside the binary; the packaged binary finds them in
# /usr/lib/grove (its run path, build.rs).
libdir="$root/usr/lib/grove"
mkdir -p "$libdir"
for lib in "$target/$profile_dir"/libllama.so.[0-9]* "$target/$profile_dir"/libggml*.so.[0-9]* \
    "$target/$profile_dir"/libggml-cpu-*.so; do
    [ -e "$lib" ] || continue
    install -m 0644 "$lib" "$libdir/$(basename "$lib")"
done
ls "$libdir"/libggml-cpu-*.so >/dev/null 2>&1 || { echo "no llama.cpp CPU backend beside $bin" >&2; exit 1; }
# As dh_strip does: no symbols, no .comment/.note sections.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/grove" "$libdir"/*.so*

install -D -m 0644 systemd/grove.service "$root/usr/lib/systemd/system/grove.service"
install -D -m 0644 systemd/grove.sysusers "$root/usr/lib/sysusers.d/grove.conf"
install -D -m 0644 packaging/deb/grove.toml "$root/etc/grove/grove.toml"

man="$root/usr/share/man/man1"
"$root/usr/bin/grove" manpages "$man"
gzip -9n "$man"/*.1

"$root/usr/bin/grove" completions bash | install -D -m 0644 /dev/stdin "$root/usr/share/bash-completion/completions/grove"
"$root/usr/bin/grove" completions zsh | install -D -m 0644 /dev/stdin "$root/usr/share/zsh/vendor-completions/_grove"
"$root/usr/bin/grove" completions fish | install -D -m 0644 /dev/stdin "$root/usr/share/fish/vendor_completions.d/grove.fish"

doc="$root/usr/share/doc/grove"
install -D -m 0644 packaging/deb/copyright "$doc/copyright"
# A native package's changelog: one entry for the version built.
{
    printf 'grove (%s) unstable; urgency=medium\n\n' "$version"
    printf '  * Built from the grove repository by deploy/build-deb.sh.\n\n'
    printf ' -- grove maintainers <grove@example.org>  %s\n' "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

for script in postinst prerm postrm; do
    install -m 0755 "packaging/deb/$script" "$root/DEBIAN/$script"
done
echo /etc/grove/grove.toml > "$root/DEBIAN/conffiles"

# The shared libraries the binary links, as dpkg-shlibdeps computes them
# (it reads a debian/control, so it runs in a scratch source tree).
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/debian"
printf 'Source: grove\n\nPackage: grove\nArchitecture: any\n' > "$scratch/debian/control"
# The private libraries in /usr/lib/grove are found there (-l) and need no
# dependency of their own (--ignore-missing-info); what they and the binary
# link from the system (libc, libstdc++, libgomp) becomes Depends.
shlibs="$(cd "$scratch" && dpkg-shlibdeps -O --ignore-missing-info -l"$OLDPWD/$libdir" "$OLDPWD/$root/usr/bin/grove" "$OLDPWD/$libdir"/*.so* 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
[ -n "$shlibs" ] || { echo "dpkg-shlibdeps found no libraries for grove" >&2; exit 1; }

cat > "$root/DEBIAN/control" <<CONTROL
Package: grove
Version: $version
Architecture: $arch
Maintainer: grove maintainers <grove@example.org>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $shlibs, systemd | systemd-standalone-sysusers | systemd-sysusers
Section: net
Priority: optional
Description: federated peer-to-peer node for Merkle-committed books
 grove keeps Project Gutenberg books in Merkle-committed SQLite shards, forms
 a private libp2p mesh with other operators' nodes (invites, votes, epochs),
 and holds grounded conversations between books on different nodes whose
 every quote can be verified offline.
 .
 The package installs the grove command, its systemd unit (not enabled),
 the grove system user, a commented /etc/grove/grove.toml, man pages and
 bash, zsh and fish completions.
CONTROL

(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch --no-dereference -d "@$SOURCE_DATE_EPOCH" {} +

deb="$out/grove_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
