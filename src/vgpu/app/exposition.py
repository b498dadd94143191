"""What the scheduler's and the monitor's Prometheus exporters share with HAMi's: the text
format they answer in and the `zone` label every HAMi metric carries."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ZONE = "vGPU"
