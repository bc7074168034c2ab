#!/bin/sh
# A fake rank that behaves like a real one: heartbeats and a record per step on the control
# channel, and on SIGTERM "finishes the step, writes a checkpoint" and exits 130 (interrupted).
# Usage: obedient_rank.sh STATE_DIR   (writes STATE_DIR/pid-$RANK, and STATE_DIR/term-$RANK on SIGTERM)
state_dir=$1
trap 'echo checkpoint > "$state_dir/term-$RANK"; exit 130' TERM
echo $$ > "$state_dir/pid-$RANK.tmp" && mv "$state_dir/pid-$RANK.tmp" "$state_dir/pid-$RANK"
step=0
while true; do
  step=$((step + 1))
  echo heartbeat >&"$EXPCTL_CONTROL_FD"
  echo "record {\"step\":$step}" >&"$EXPCTL_CONTROL_FD"
  sleep 0.05
done
