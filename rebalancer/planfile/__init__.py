"""The plan file's model, below both the planner and the executor: ``result`` (a ``Plan`` and its ``Change``s, the
content hash an approval names, plan.json / reassignment.json / rollback.json written and read), ``record`` (the
solver's typed record) and ``load_types`` (the shape of the load summary). The planner writes it; the executor, the
validation and the report read it; none of it plans or executes."""
