"""What a study is made of besides its model and analysis, shared by the plug-ins and the spec:
parameters and their sampling (params), expressions, quantities, the files a run depends on."""
