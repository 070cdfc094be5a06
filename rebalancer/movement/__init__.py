"""The movement model, below both the planner and the executor: a plan's changes as steps and batches
(``batches``), how throttles share their rate among the copies through them (``fluid``), the rolling schedule
(``schedule``), the time a plan takes at a throttle (``estimate``) and the rates an operator writes (``rate``). Pure
functions of plain data: the plan's summary estimates its execution with them, the executor runs them, the
validation's transient-disk gate replays them; none of them reads a plan file or talks to a cluster."""
