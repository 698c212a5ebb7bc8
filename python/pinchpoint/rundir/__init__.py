"""The run folder, the one contract between the stages: what its files hold and how they
are read. `steady` defines the part of each step every stage counts."""
