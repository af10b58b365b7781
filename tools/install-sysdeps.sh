#!/usr/bin/env bash
# Installs the system packages the tests drive when they are missing: kcat (a librdkafka
# client), zookeeper (cluster coordination), a Java 17 runtime (PySpark, for pylog.spark) and
# Chromium with its WebDriver (the console's browser tests, tests/browser).
# Debian/Ubuntu only; needs root or sudo.
set -euo pipefail

need=()
command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || need+=(kcat)
[ -e /usr/share/zookeeper/bin/zkServer.sh ] || need+=(zookeeper)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)

[ ${#need[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-sysdeps: please install ${need[*]} with your package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-sysdeps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq || true
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
