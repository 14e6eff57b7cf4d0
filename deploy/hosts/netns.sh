#!/usr/bin/env bash
# Worker hosts on one machine, for trying the multi-host layout and for CI: each host is a network
# namespace (Debian's iproute2) on a bridge, reaching the coordinator over the bridge address
# (.1 of the subnet), never over loopback. Worker i gets .(10+i). On real hosts this script has no
# counterpart: their LAN plays the bridge. Needs root. Idempotent.
#   netns.sh up N      create the bridge, the coordinator address and N worker namespaces
#   netns.sh down      remove every namespace and link with the prefix
#   netns.sh address I print worker I's address (0: the coordinator's)
#   SABOT_NETNS_PREFIX (sabot; names are PREFIX-br, PREFIXwI, PREFIXvI: at most 15 characters)
#   SABOT_NETNS_SUBNET (10.231.0.0/24; a /24)
set -euo pipefail
PREFIX=${SABOT_NETNS_PREFIX:-sabot}
SUBNET=${SABOT_NETNS_SUBNET:-10.231.0.0/24}
NET=${SUBNET%.*/24}
[ "$NET" != "$SUBNET" ] || { echo "SABOT_NETNS_SUBNET must be a /24 such as 10.231.0.0/24, got $SUBNET" >&2; exit 2; }
BRIDGE="${PREFIX}br"

address() { if [ "$1" = 0 ]; then echo "$NET.1"; else echo "$NET.$((10 + $1))"; fi; }

up() {
  local count=$1
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr show dev "$BRIDGE" | grep -q "inet $(address 0)/" || ip addr add "$(address 0)/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in $(seq 1 "$count"); do
    local ns="${PREFIX}w$i" veth="${PREFIX}v$i"
    ip netns list | grep -qx "$ns\( .*\)\?" || ip netns add "$ns"
    if ! ip link show "$veth" >/dev/null 2>&1; then
      ip link add "$veth" type veth peer name eth0 netns "$ns"
      ip link set "$veth" master "$BRIDGE" up
      ip -n "$ns" addr add "$(address "$i")/24" dev eth0
    fi
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
  done
}

down() {
  for ns in $(ip netns list | awk '{print $1}' | grep "^${PREFIX}w[0-9]*$" || true); do
    ip netns pids "$ns" | xargs -r kill -9  # a namespace lives on while a process holds it
    ip netns del "$ns"
  done
  for link in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^${PREFIX}v[0-9]*$" || true); do
    ip link del "$link" 2>/dev/null || true  # gone already when its namespace went
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE" || true
}

case "${1:-}" in
  up) up "${2:?how many worker hosts}" ;;
  down) down ;;
  address) address "${2:?which host: 0 for the coordinator}" ;;
  *) echo "usage: $0 up N | down | address I" >&2; exit 2 ;;
esac
