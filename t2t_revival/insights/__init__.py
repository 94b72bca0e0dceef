"""T2T Insights: the web page of `t2t-insights-server` (tensor2tensor's
`insights/`, revived): a run's translation of a sentence, its beam search as
a graph (`BeamGraph`, from the search's own choices), every layer's attention
and the tokenization (`RunInsights`), served by a Flask app (`insights_app`)
whose page is plain HTML, CSS and JavaScript in `static/`."""
