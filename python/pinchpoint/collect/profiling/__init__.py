"""The hot functions of the stack's Python tiers, sampled with py-spy during one step of
the load: which processes (`targets.py`), one py-spy run (`pyspy.py`), its stacks
(`stacks.py`), and the step's sampling as the run goes (`step.py`)."""
