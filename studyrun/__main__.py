from studyrun.cli import console

console()
