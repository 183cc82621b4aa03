# The throwaway root's helpers (tests/packaging.rs appends the guide's
# commands and `package_checks`). No service manager runs here, so
# start_unit starts what the installed unit says: its User and Group, its
# StateDirectory and RuntimeDirectory with their modes, its UMask and
# ExecStart (the sandbox itself is tests/sandbox.rs's subject).
set -u
unit=/usr/lib/systemd/system/grove.service
val() { sed -n "s/^$1=//p" "$unit" | head -n 1; }
start_unit() {
    user=$(val User); group=$(val Group)
    state=/var/lib/$(val StateDirectory); runtime=/run/$(val RuntimeDirectory)
    install -d -o "$user" -g "$group" -m "$(val StateDirectoryMode)" "$state"
    install -d -o "$user" -g "$group" -m "$(val RuntimeDirectoryMode)" "$runtime"
    (
        umask "$(val UMask)"
        cd /
        # shellcheck disable=SC2046 # ExecStart is a command line.
        exec env STATE_DIRECTORY="$state" RUNTIME_DIRECTORY="$runtime" \
            setpriv --reuid "$user" --regid "$group" --init-groups $(val ExecStart)
    ) >/tmp/service.log 2>&1 &
    echo $! >/tmp/service.pid
    i=0
    while [ ! -S "$runtime/grove.sock" ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    [ -S "$runtime/grove.sock" ] || { echo "::service did not start"; cat /tmp/service.log; }
}
stop_unit() {
    [ -f /tmp/service.pid ] || return 0
    pid=$(cat /tmp/service.pid)
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    rm -f /tmp/service.pid
}
fail() { echo "::failed $*"; }
# The operator of the guide: a user who runs `grove` without sudo.
useradd -m -s /bin/sh alice

package_checks() {
    [ "$(runuser -u alice -- grove node status --json 2>/dev/null | grep -c peer_id)" -ge 1 ] \
        && echo "::service answered" || fail "grove node status as alice"
    stop_unit
    [ -L /etc/systemd/system/multi-user.target.wants/grove.service ] && echo "::enabled ok" || fail "not enabled"
    v=$(grove --version)
    [ "$v" = "grove $(dpkg-query -W -f '${Version}' grove)" ] && echo "::installed version ok" || fail "version $v"
    [ "$(stat -c %a /usr/bin/grove)" = 755 ] && readelf -W -S /usr/bin/grove | grep -q ' \.text ' \
        && ! readelf -W -S /usr/bin/grove | grep -qE ' \.(symtab|debug_info|debug_line) ' && echo "::stripped ok" || fail strip
    ok=1
    for page in grove grove-mesh-join grove-node-run grove-completions grove-backup; do
        man -w "$page" >/dev/null 2>&1 || { ok=0; fail "no man page $page"; }
    done
    MANPAGER=cat man grove-mesh-join 2>/dev/null | grep -q INVITE || { ok=0; fail "man grove-mesh-join"; }
    [ "$ok" = 1 ] && echo "::man ok"
    grep -q 'complete -F _grove' /usr/share/bash-completion/completions/grove \
        && grep -q '#compdef grove' /usr/share/zsh/vendor-completions/_grove \
        && grep -q 'complete -c grove' /usr/share/fish/vendor_completions.d/grove.fish \
        && echo "::completions ok" || fail completions
    getent passwd grove | grep -q ':/var/lib/grove:/usr/sbin/nologin$' && getent group grove >/dev/null \
        && echo "::user ok" || fail "user $(getent passwd grove)"
    systemd-analyze verify "$unit" && echo "::verify ok" || fail "systemd-analyze verify"
    ls /var/backups/grove-*/ >/dev/null 2>&1 && echo "::backup ok" || fail "no backup"
    dpkg -r grove >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -r"; }
    [ ! -e /usr/bin/grove ] && [ ! -e "$unit" ] && [ ! -e /usr/share/man/man1/grove.1.gz ] \
        && [ -f /etc/grove/grove.toml ] && [ -d /var/lib/grove ] && getent passwd grove >/dev/null \
        && echo "::removed ok" || fail "after dpkg -r: $(ls /etc/grove /var/lib/grove 2>&1)"
    dpkg -P grove >>/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -P"; }
    [ ! -e /etc/grove ] && [ ! -e /var/lib/grove ] && ! dpkg -s grove >/dev/null 2>&1 \
        && [ ! -e /etc/systemd/system/multi-user.target.wants/grove.service ] \
        && getent passwd grove >/dev/null \
        && echo "::purged ok" || fail "after dpkg -P: $(ls -d /etc/grove /var/lib/grove /etc/systemd/system/multi-user.target.wants/grove.service 2>&1)"
}
