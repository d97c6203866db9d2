"""KubeVela's workflow engine, as kubevela/workflow is to KubeVela: steps as written (spec.py), their scheduling
(engine.py, with backoff.py, pending and data passing in dataflow.py), how a step of each type runs (steptypes.py),
CUE step templates turned into provider actions (templates.py, task.py, actions.py) and the providers the
templates import (providers/). It depends on cue/ and kube/ only, and reaches an app's components through the
Delivery that core/ hands it (delivery.py)."""
