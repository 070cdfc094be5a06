#!/usr/bin/env bash
# kafka-demo-topics service of docker-compose.yaml: skewed demo topics so the rebalance DAGs have work.
#   demo.orders   12 partitions, RF 3, every leader on broker 1         -> leader skew (leader plan, no data moves)
#   demo.clicks   12 partitions, RF 2, on brokers 1 and 2 only (az-a)   -> replica skew, broker 3 (az-b) empty
#   demo.audit     6 partitions, RF 3, leaders rotated                  -> already balanced (control)
# Each new topic gets some data, so plans have bytes to weigh. Topics that already exist are left alone.
set -euo pipefail

bootstrap=${BOOTSTRAP_SERVERS:-kafka1:9092,kafka2:9092,kafka3:9092}

repeat() {  # repeat N ASSIGNMENT... : the assignments cycled to N partitions, comma-separated
    local n=$1; shift
    local out=() i
    for ((i = 0; i < n; i++)); do out+=("${@:$((i % $# + 1)):1}"); done
    (IFS=,; echo "${out[*]}")
}

create() {  # create TOPIC ASSIGNMENT RECORDS [--config k=v ...]
    local topic=$1 assignment=$2 records=$3; shift 3
    if kafka-topics --bootstrap-server "$bootstrap" --list | grep -qx "$topic"; then
        echo "kafka-demo-topics: $topic exists, left alone"
        return 0
    fi
    kafka-topics --bootstrap-server "$bootstrap" --create --topic "$topic" --replica-assignment "$assignment" "$@"
    kafka-producer-perf-test --topic "$topic" --num-records "$records" --record-size 1024 --throughput -1 \
        --producer-props "bootstrap.servers=$bootstrap" acks=all linger.ms=20 | tail -n 1
    echo "kafka-demo-topics: created $topic ($assignment), $records records"
}

create demo.orders "$(repeat 12 1:2:3 1:3:2)" 30000
create demo.clicks "$(repeat 12 1:2 2:1 1:2)" 60000 --config min.insync.replicas=1
create demo.audit "$(repeat 6 1:2:3 2:3:1 3:1:2)" 5000
partitions=$(kafka-topics --bootstrap-server "$bootstrap" --describe --topic 'demo\..*' | grep -c "Leader:" || true)
echo "kafka-demo-topics: done, $partitions demo partitions"
