"""pinchpoint: finds the component that limits a backend stack under load."""
