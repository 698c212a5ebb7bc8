"""The run folder, the one contract between the stages: what its files hold (`files`,
`shapes`, `schemas`) and how they are read (`view.RunView`, the one reader, with the
requests' digest and the tiers' sample it keeps). `steady` defines the part of each step
every stage counts."""
