"""The test bench's stacks, kept out of the installed package: the diagnosis matrix, the
seeded scenarios and their stack builders (PostgreSQL, uWSGI, cgroup and network limits,
a neighbour hogging the CPU, a traced fan-out), and the check of a verdict against its own
evidence. The tests and the benches import it; pinchpoint never does.

It sits beside the package under `python/` so that an editable install (`maturin
develop`) makes it importable everywhere the package is, the application servers it
starts included; the wheel holds only `python/pinchpoint/` (tests/test_wheel_contents.py).
"""
