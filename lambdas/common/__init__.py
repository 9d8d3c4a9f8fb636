"""What every ProfStack Lambda function shares: the environment model's loader (`env`)."""
