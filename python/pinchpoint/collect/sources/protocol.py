"""What `pinchpoint agent` and its client (`remote.py`) agree on: the API's paths, the
media type of resource samples, and the name of the agent's own process in them."""

from urllib.parse import quote

API_PREFIX = "/v1/"
COMPONENTS = API_PREFIX + "components"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
# What the agent calls its own process in resource samples.
AGENT_SELF = "agent"


def run_path(run_id: str, *rest: str) -> str:
    """The path of a run's resource: `/v1/runs/<id>/start`, `.../logs/<component>`."""
    parts = [quote(p, safe="") for p in (run_id, *rest)]
    return API_PREFIX + "runs/" + "/".join(parts)
