#!/bin/sh
# build.sh -- `make deb`: trainctl_VERSION_ARCH.deb from a built tree, with
# dpkg-deb (no debhelper): the binary, the man pages (scripts/man.py), the
# bash and zsh completions (`trainctl completion`), the Python package and
# the deploy/ files when the tree has them, /etc/trainctl/server.yaml (a
# conffile), trainctl-server.service and the maintainer scripts.
#
#   packaging/deb/build.sh BUILD_DIR OUT_DIR     (prints the .deb's path)
#
# Depends: dpkg-shlibdeps on the binary (its linked libraries), plus the
# packages of the libraries it dlopen()s (src/core/lazylib.c: libcurl,
# libmicrohttpd, libcrypto; found with ldconfig and dpkg -S, as
# dpkg-shlibdeps cannot see a dlopen), adduser (postinst: addgroup), plus
# python3 with the Python package.
set -eu
umask 022
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
out=$2
bin=$build/trainctl
[ -x "$bin" ] || { echo "build.sh: no $bin (make build first)" >&2; exit 2; }
revision=${DEB_REVISION:-1}
version=$("$bin" --version | awk '{print $2}')-$revision
arch=$(dpkg --print-architecture)
# reproducible: the changelog's date, not the clock's
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date -d "$(sed -n 's/^ -- .*>  //p' "$here/changelog" | head -n 1)" +%s)}
export SOURCE_DATE_EPOCH

work=$build/deb
root=$work/root
rm -rf "$work"
mkdir -p "$root/DEBIAN" "$out"

# the binary, without its debug sections
install -D -m 0755 "$bin" "$root/usr/bin/trainctl"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/trainctl"

# man pages from the binary's --help and docs/spec.md
python3 "$src/scripts/man.py" "$bin" "$work/man" "$src/docs/spec.md"
for f in "$work"/man/*.[15]; do
	sec=${f##*.}
	install -d "$root/usr/share/man/man$sec"
	gzip -9n -c "$f" > "$root/usr/share/man/man$sec/${f##*/}.gz"
	chmod 0644 "$root/usr/share/man/man$sec/${f##*/}.gz"
done

# shell completions, as the binary prints them
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions"
"$bin" completion bash > "$root/usr/share/bash-completion/completions/trainctl"
"$bin" completion zsh > "$root/usr/share/zsh/vendor-completions/_trainctl"

# the Python package (python/trainctl), when the tree has one
pydeps=""
if [ -d "$src/python/trainctl" ]; then
	(cd "$src/python" && find trainctl -type f ! -path '*/__pycache__/*' ! -name '*.pyc') |
		sort | while read -r f; do
		install -D -m 0644 "$src/python/$f" "$root/usr/lib/python3/dist-packages/$f"
	done
	pydeps=", python3"
fi

# Prometheus rules and Grafana dashboards (deploy/), when the tree has them
for kind in prometheus grafana; do
	for f in "$src/deploy/$kind"/*; do
		[ -f "$f" ] || continue
		install -D -m 0644 "$f" "$root/usr/share/trainctl/$kind/${f##*/}"
	done
done

# the service and its settings
install -D -m 0644 "$here/trainctl-server.service" "$root/lib/systemd/system/trainctl-server.service"
install -D -m 0644 "$here/server.yaml" "$root/etc/trainctl/server.yaml"
echo /etc/trainctl/server.yaml > "$root/DEBIAN/conffiles"

# documentation
install -D -m 0644 "$here/copyright" "$root/usr/share/doc/trainctl/copyright"
gzip -9n -c "$here/changelog" > "$root/usr/share/doc/trainctl/changelog.Debian.gz"
install -D -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/trainctl"

for s in postinst prerm postrm; do
	install -m 0755 "$here/$s" "$root/DEBIAN/$s"
done

# Depends: the linked libraries through dpkg-shlibdeps (it wants a debian/control)
mkdir -p "$work/shlibs/debian"
printf 'Source: trainctl\n\nPackage: trainctl\nArchitecture: any\n' > "$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$root/usr/bin/trainctl" 2>/dev/null |
	sed -n 's/^shlibs:Depends=//p')
# and the dlopen()ed ones: the package holding each soname
dl=""
for so in $(sed -n 's/.*{ "\(lib[a-z0-9]*\.so\.[0-9]*\)", ".*/\1/p' "$src/src/core/lazylib.c"); do
	path=$(ldconfig -p | awk -v so="$so" '$1 == so { print $NF; exit }')
	[ -n "$path" ] || { echo "build.sh: $so is not installed here" >&2; exit 1; }
	pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1) ||
		pkg=$(dpkg -S "$path" | head -n 1 | cut -d: -f1)
	dl="$dl, $pkg"
done

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
	-e "s/@DEPENDS@/$shlibs$dl, adduser$pydeps/" "$here/control.in" > "$root/DEBIAN/control"

# md5sums of every file but the conffiles (dpkg keeps theirs itself)
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort |
	grep -vx etc/trainctl/server.yaml | xargs md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles"

# every file's time the changelog's (reproducible)
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
deb="$out/trainctl_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
