"""The papers' theory beside the simulator: each module here is a `llmsched theory NAME` command."""
