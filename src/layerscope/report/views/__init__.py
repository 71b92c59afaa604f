"""Report views: pure functions from a saved run to the rows, series and tracks every renderer shows, one
module per view (layers, summary, findings, timeline, bisect, comparison, pipeline, stress, experiments;
``common`` holds what they share and the contract)."""
