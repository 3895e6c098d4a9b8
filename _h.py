import time, numpy as np
from armtwin import robots
from armtwin.envs.hinge_fit import read_run_log, fit_hinge
spec = robots.get("irb120")
tr = read_run_log("/tmp/ident/art.csv", spec)
print(len(tr.t), tr.period)
t0=time.time()
rep = fit_hinge(spec, tr, max_fit_seconds=4.0, max_evaluations=60)
print(time.time()-t0, rep.simulations, rep.improved)
print("rule K", rep.rule.stiffness, "D", rep.rule.damping)
print("fit  K", np.round(rep.fitted.stiffness, 1), "D", np.round(rep.fitted.damping, 2))
print("fit part rms rule", np.round(rep.rms_rule, 3), "fit", np.round(rep.rms_fit, 3))
print("held rms rule", np.round(rep.rms_rule_held, 3), "fit", np.round(rep.rms_fit_held, 3), rep.max_rule_held, rep.max_fit_held)
print("eig", rep.eigen_rule, rep.eigen_fit)
