from setuptools import find_packages, setup

setup(
    name="velashard",
    version="0.1.0",
    description="KubeVela-style application delivery controller for Kubernetes with a sharded Application controller",
    python_requires=">=3.11",
    packages=find_packages(include=["velashard", "velashard.*"]),
    include_package_data=True,
    package_data={"velashard": ["**/*.yaml", "**/*.json", "definitions/*.cue", "workflow/providers/*.cue",
                                 "workflow/steps/*.cue", "dashboard/templates/*.html", "dashboard/static/*"]},
    install_requires=[
        "kubernetes>=29",
        "Flask>=3.0",
        # Flask's own server library: the dashboard serves with it directly, to bind 127.0.0.1 on a free port
        "Werkzeug>=3.0",
        # the webhook's worker reads gunicorn's private state (velashard/webhook/worker.py): the releases it was
        # tested with; outside them it would run gunicorn's own, slower gthread worker
        "gunicorn>=25.0.3,<28",
        "cryptography>=42",
        "cachetools>=5.3",
        "prometheus_client>=0.20",
        "PyYAML>=6",
        "cel-expr-python>=0.1.3",
        "urllib3>=2",
        # JSON on the hot paths (kube/jsoncodec.py: cached objects packed and unpacked, lists and watch events
        # decoded): three times the standard library's speed to encode, 1.5 to 2 times to decode; tested with 3.8.3
        # (wheels for CPython 3.11 on x86_64 and aarch64)
        "orjson>=3.8,<4",
        # RE2 (linear-time matching, the syntax CUE specifies) for CUE's =~, !~ and regexp builtins; tested with
        # 1.1.20251105 (wheels for CPython 3.11 on x86_64 and aarch64)
        "google-re2>=1.1,<2",
        # real Helm (the Go SDK): `velashard dev` installs the chart with it, as users do
        "helm-python-sdk>=0.2",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "responses>=0.25",
            "hypothesis>=6.100",
            # a real SMTP server on loopback for the workflow's email provider (tests/integration/loopback.py)
            "aiosmtpd>=1.4",
            # drives a real browser (Debian's chromium-headless-shell, which .ci/run installs) through the dashboard
            "playwright>=1.40",
            # two test processes, a module each: the e2e modules spend most of their time waiting on leases and
            # grace periods, which the other process fills (the suite in 13 min instead of 22 on a busy 2-core box)
            "pytest-xdist>=3.5",
        ],
    },
    entry_points={"console_scripts": ["velashard=velashard.cli.main:main"]},
)
