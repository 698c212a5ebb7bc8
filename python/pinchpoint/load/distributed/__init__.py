"""Load generators on a Ray cluster: a plan's load split between N engines on N actors,
merged into one run folder (`pinchpoint run plan.toml --ray auto|ADDRESS`).

`shares` splits the plan, `actor` is the generator, `merge` joins their results and
`runner` orchestrates. Ray is imported by `runner` and `actor` when a run asks for it,
never on `import pinchpoint`.
"""
