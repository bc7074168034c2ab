#!/bin/sh
# A fake rank that prints the launch contract it was given, one variable per line, so the tests
# can check what each rank received.
for name in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT OMP_NUM_THREADS \
  EXPCTL_CONTROL_FD; do
  eval "echo $name=\${$name-unset}"
done
