# Run by tests/packaging.rs under `unshare --mount --pid --fork --net`: a
# throwaway root whose / is an overlay of the host's / with a tmpfs upper
# layer, so nothing reaches the host's /etc, /run, users or systemd. Runs
# $INNER there (mounts under $WORKDIR, the test's temporary directory) with the package $DEB (as target/debian/$DEB_NAME), then lists what the upper layer holds.
set -eu
t="$WORKDIR"
mount -t tmpfs tmpfs "$t"
mkdir "$t/upper" "$t/work" "$t/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$t/upper,workdir=$t/work" "$t/root"
r="$t/root"
mount --rbind /dev "$r/dev"
mount -t proc proc "$r/proc"
mount -t sysfs sysfs "$r/sys" 2>/dev/null || mount --rbind /sys "$r/sys"
mount -t tmpfs tmpfs "$r/run"
mount -t tmpfs tmpfs "$r/tmp"
mkdir -p "$r/tmp/repo/target/debian"
cp "$DEB" "$r/tmp/repo/target/debian/$DEB_NAME"
cp "$INNER" "$r/tmp/inner.sh"
ip link set lo up
rc=0
chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    sh /tmp/inner.sh || rc=$?
# What stays in the root, as paths relative to it (directories aside).
(cd "$t/upper" && find . ! -type d | sed 's|^\./|::left |' | sort)
exit "$rc"
