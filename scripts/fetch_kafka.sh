#!/usr/bin/env bash
# Fetch the jars of real Apache Kafka from Maven Central into .kafka/<VERSION_DIR>/libs/ (git-ignored), for
# rebalancer/localkafka.py (`rebalancer kafka up`). VERSION_DIR is a directory of kafka/ holding a pom.xml
# (3.9 = Kafka 3.9.2 with ZooKeeper mode, 4.x = Kafka 4.3.1, KRaft only); no argument fetches every one.
#
# Idempotent: does nothing when the pom is unchanged since the last fetch (a stamp of its hash, as scripts/setup.sh
# keeps for the venv). Maven's local repository is its default (~/.m2, or -Dmaven.repo.local in MAVEN_OPTS); an
# empty one works (Maven downloads the dependency plugin too). The new jars replace the old ones only once Maven
# has succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

if [ $# -eq 0 ]; then
    set -- $(cd kafka && ls -d */ | tr -d /)
fi

if ! command -v mvn >/dev/null; then
    log "installing Debian's maven (to fetch the Kafka jars)"
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq maven >/dev/null
fi

for version in "$@"; do
    pom=kafka/$version/pom.xml
    [ -f "$pom" ] || { echo "fetch_kafka: no $pom (choose one of: $(cd kafka && ls -d */ | tr -d / | xargs))" >&2; exit 2; }
    dest=.kafka/$version
    stamp=$dest/.fetched-$(sha256sum "$pom" | cut -c1-16)
    if [ -f "$stamp" ] && [ -d "$dest/libs" ]; then
        continue
    fi
    kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
    log "fetching Apache Kafka $kafka_version jars from Maven Central into $dest/libs"
    mkdir -p "$dest"
    rm -rf "$dest/libs.tmp"
    if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$dest/libs.tmp" >"$dest/fetch.log" 2>&1; then
        tail -n 20 "$dest/fetch.log" >&2
        echo "fetch_kafka: Maven could not fetch $pom (full output in $dest/fetch.log)" >&2
        exit 1
    fi
    rm -rf "$dest/libs" "$dest"/.fetched-*
    mv "$dest/libs.tmp" "$dest/libs"
    touch "$stamp"
    log "Kafka $kafka_version: $(ls "$dest/libs" | wc -l) jars, $(du -sh "$dest/libs" | cut -f1)"
done
