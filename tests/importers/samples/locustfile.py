"""The Locust sample's users:
locust -f locustfile.py --headless -u 4 -r 2 --run-time 3s --host http://127.0.0.1:18089 \
    --csv locust --only-summary"""

from locust import HttpUser, constant, task


class Visitor(HttpUser):
    wait_time = constant(0.05)

    @task(8)
    def index(self) -> None:
        self.client.get("/")

    @task(3)
    def slow(self) -> None:
        self.client.get("/slow")

    @task(1)
    def error(self) -> None:
        self.client.get("/error")
