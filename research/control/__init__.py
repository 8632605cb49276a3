"""Control of a research: the use cases that start, steer and stop it, the steps they queue, and the limits on them."""
