"""The built-in definition catalog: KubeVela's component and trait names and parameters, our templates."""
