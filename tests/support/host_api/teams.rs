//! Teams: TEAM_WORLD and TEAM_NODE, strided and 2D splits (nested, non-dividing `xrange`),
//! PE translation, team barriers with their writes checked, destroy and slot reuse, the
//! error cases and the team limit.

use symmem::{Cmp, Runtime, SymBuf, Team};

use super::{check, check_eq, expect_err, finish, key, OrFail, Outcome};

/// Barrier rounds per team checked.
const T_ROUNDS: u64 = 12;

/// Every team operation on a correct program: `teams ok` on every PE.
pub fn teams(rt: &Runtime) -> Outcome {
    finish(rt, "teams", teams_inner(rt))
}

fn teams_inner(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.team_world();
    check_eq!(world.n_pes(), n, "TEAM_WORLD size");
    check_eq!(world.my_pe(), me, "TEAM_WORLD my_pe");
    check!(world.is_predefined(), "TEAM_WORLD is predefined");
    for p in 0..n {
        check_eq!(world.world_pe(p).or_fail()?, p, "TEAM_WORLD world_pe");
    }
    exercise(rt, Some(&world), 1)?;

    // TEAM_NODE: the PEs sharing this PE's memory, in world order.
    let node = rt.team_node();
    let local = rt.local_pes().to_vec();
    let simulated: usize = std::env::var("SYMMEM_SIMULATE_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    check_eq!(node.n_pes(), n / simulated, "TEAM_NODE size");
    check_eq!(node.n_pes(), local.len(), "TEAM_NODE size vs local_pes");
    check_eq!(local[node.my_pe()], me, "TEAM_NODE my_pe");
    for (i, &p) in local.iter().enumerate() {
        check_eq!(node.translate_pe(i, &world), Some(p), "TEAM_NODE -> world");
        check_eq!(world.translate_pe(p, &node), Some(i), "world -> TEAM_NODE");
    }
    for p in (0..n).filter(|p| !local.contains(p)) {
        check_eq!(
            world.translate_pe(p, &node),
            None,
            "off-node PE {p} in TEAM_NODE"
        );
    }
    exercise(rt, Some(&node), 2)?;

    strided(rt, &world)?;
    for xrange in 1..=n + 1 {
        two_d(rt, &world, xrange)?;
    }
    // Creating and destroying more teams than SYMMEM_MAX_TEAMS reuses the slots.
    let before = rt.teams_available();
    for round in 0..rt.max_teams() as u64 + 4 {
        let t = world
            .split_strided(0, 1, n)
            .or_fail()?
            .ok_or("whole team")?;
        check_eq!(t.my_pe(), me, "round {round}: my_pe");
        t.barrier().or_fail()?;
        t.destroy().or_fail()?;
    }
    check_eq!(rt.teams_available(), before, "slots after destroying");
    rt.barrier_all().or_fail()
}

/// Strided splits of the world: even and odd PEs, a team of one, and a team split from a
/// split team, with translation between them.
fn strided(rt: &Runtime, world: &Team<'_>) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let evens = world.split_strided(0, 2, n.div_ceil(2)).or_fail()?;
    let odds = if n >= 2 {
        world.split_strided(1, 2, n / 2).or_fail()?
    } else {
        None
    };
    let (mine, other) = if me % 2 == 0 {
        (evens.as_ref(), odds.as_ref())
    } else {
        (odds.as_ref(), evens.as_ref())
    };
    check!(
        other.is_none(),
        "PE {me} got a handle to the other parity's team"
    );
    let team = mine.ok_or("no handle to my own parity's team")?;
    check_eq!(team.my_pe(), me / 2, "strided my_pe");
    check_eq!(team.n_pes(), (n - me % 2).div_ceil(2), "strided size");
    for i in 0..team.n_pes() {
        let w = me % 2 + 2 * i;
        check_eq!(team.world_pe(i).or_fail()?, w, "strided world_pe");
        check_eq!(team.translate_pe(i, world), Some(w), "strided -> world");
        check_eq!(world.translate_pe(w, team), Some(i), "world -> strided");
    }
    for w in (0..n).filter(|w| w % 2 != me % 2) {
        check_eq!(
            world.translate_pe(w, team),
            None,
            "PE {w} is not in my team"
        );
    }
    check_eq!(
        team.translate_pe(team.n_pes(), world),
        None,
        "past the team"
    );
    exercise(rt, Some(team), 3)?;

    // A split of the split: its PEs 1.. (world PEs parity + 2, + 4, ...).
    let size = team.n_pes();
    let parity_team = if me % 2 == 0 { evens } else { odds };
    let team = parity_team.expect("checked above");
    let sub = if size >= 2 {
        team.split_strided(1, 1, size - 1).or_fail()?
    } else {
        None
    };
    match &sub {
        None => check!(size < 2 || team.my_pe() == 0, "only team PE 0 is left out"),
        Some(sub) => {
            check_eq!(sub.my_pe(), team.my_pe() - 1, "nested my_pe");
            check_eq!(sub.n_pes(), size - 1, "nested size");
            check_eq!(sub.world_pe(0).or_fail()?, me % 2 + 2, "nested world_pe");
            check_eq!(
                sub.translate_pe(sub.my_pe(), &team),
                Some(team.my_pe()),
                "nested -> parent"
            );
            check_eq!(team.translate_pe(0, sub), None, "parent PE 0 -> nested");
        }
    }
    exercise(rt, sub.as_ref(), 4)?;
    if let Some(sub) = sub {
        sub.destroy().or_fail()?;
    }
    // A team of one PE, whatever the stride.
    let last = world.split_strided(n - 1, 0, 1).or_fail()?;
    check_eq!(last.is_some(), me == n - 1, "team of the last PE");
    if let Some(t) = last {
        check_eq!((t.my_pe(), t.n_pes()), (0, 1), "team of one");
        t.sync().or_fail()?;
        t.destroy().or_fail()?;
    }
    team.destroy().or_fail()?;
    rt.barrier_all().or_fail()
}

/// `split_2d(xrange)` of the world: PE p at (p % xr, p / xr) with xr = min(xrange, n).
fn two_d(rt: &Runtime, world: &Team<'_>, xrange: usize) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (xteam, yteam) = world.split_2d(xrange).or_fail()?;
    let xr = xrange.min(n);
    let (x, y) = (me % xr, me / xr);
    check_eq!(xteam.my_pe(), x, "xrange {xrange}: x-team my_pe");
    check_eq!(yteam.my_pe(), y, "xrange {xrange}: y-team my_pe");
    check_eq!(
        xteam.n_pes(),
        xr.min(n - y * xr),
        "xrange {xrange}: row size"
    );
    check_eq!(
        yteam.n_pes(),
        (n - x).div_ceil(xr),
        "xrange {xrange}: column size"
    );
    for j in 0..xteam.n_pes() {
        check_eq!(
            xteam.world_pe(j).or_fail()?,
            y * xr + j,
            "xrange {xrange}: row PE {j}"
        );
    }
    for j in 0..yteam.n_pes() {
        check_eq!(
            yteam.world_pe(j).or_fail()?,
            x + j * xr,
            "xrange {xrange}: column PE {j}"
        );
    }
    // Row and column meet in this PE only.
    check_eq!(
        xteam.translate_pe(x, &yteam),
        Some(y),
        "xrange {xrange}: me, row -> column"
    );
    for j in (0..xteam.n_pes()).filter(|&j| j != x) {
        check_eq!(
            xteam.translate_pe(j, &yteam),
            None,
            "xrange {xrange}: row PE {j} in my column"
        );
    }
    exercise(rt, Some(&xteam), 10 + xrange as u64)?;
    exercise(rt, Some(&yteam), 20 + xrange as u64)?;
    xteam.destroy().or_fail()?;
    yteam.destroy().or_fail()?;
    rt.barrier_all().or_fail()
}

/// Team barriers and syncs, checked: every round each team PE puts a value to every other
/// team PE and increments an arrival counter on team PE 0, then barriers (even rounds) or
/// syncs (odd rounds, blocking puts); after it, the counter is in
/// `[m * round, m * round + m - 1]` and every team PE's value of this round has arrived.
/// Collective over the world (it allocates): PEs outside the team pass `None`.
fn exercise(rt: &Runtime, team: Option<&Team<'_>>, tag: u64) -> Outcome {
    let n = rt.n_pes();
    let arrivals = rt.calloc::<u64>(1).or_fail()?;
    let slots = rt.calloc::<u64>(2 * n).or_fail()?;
    if let Some(team) = team {
        exercise_team(rt, team, tag, &arrivals, &slots)?;
    }
    rt.barrier_all().or_fail()?;
    rt.free(arrivals).or_fail()?;
    rt.free(slots).or_fail()
}

/// [`exercise`] on a member of `team`.
fn exercise_team(
    rt: &Runtime,
    team: &Team<'_>,
    tag: u64,
    arrivals: &SymBuf<u64>,
    slots: &SymBuf<u64>,
) -> Outcome {
    let n = rt.n_pes();
    let (i, m) = (team.my_pe(), team.n_pes());
    let leader = team.world_pe(0).or_fail()?;
    for round in 1..=T_ROUNDS {
        let bank = (round % 2) as usize * n;
        rt.atomic_inc(arrivals.at(0), leader).or_fail()?;
        for t in 0..m {
            let v = key(&[tag, i as u64, t as u64, round]);
            let pe = team.world_pe(t).or_fail()?;
            if round % 2 == 0 {
                rt.put_nbi(slots.at(bank + i), &[v], pe).or_fail()?;
            } else {
                rt.put(slots.at(bank + i), &[v], pe).or_fail()?;
            }
        }
        if round % 2 == 0 {
            team.barrier().or_fail()?;
        } else {
            team.sync().or_fail()?;
        }
        let c = rt.atomic_fetch(arrivals.at(0), leader).or_fail()?;
        let lo = m as u64 * round;
        check!(
            (lo..lo + m as u64).contains(&c),
            "team {tag}, round {round}: arrival count {c}, expected {lo}..{}",
            lo + m as u64
        );
        let mut got = vec![0u64; m];
        rt.read_local(slots.at(bank), &mut got).or_fail()?;
        for (s, g) in got.iter().enumerate() {
            check_eq!(
                *g,
                key(&[tag, s as u64, i as u64, round]),
                "team {tag}, round {round}: value of team PE {s}"
            );
        }
    }
    Ok(())
}

/// The errors: bad triplets, a bad xrange, PEs that disagree, world_pe past the team,
/// destroying the predefined teams. Every PE gets the same error, and the team still works.
pub fn team_errors(rt: &Runtime) -> Outcome {
    finish(rt, "team_errors", team_errors_inner(rt))
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn team_errors_inner(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let world = rt.team_world();
    let s = |v: &str| v.to_string();
    expect_err(
        world.split_strided(0, 1, 0),
        "InvalidArgument",
        &[s("size must be at least 1")],
    )?;
    expect_err(
        world.split_strided(n, 1, 1),
        "InvalidArgument",
        &[
            format!("start {n}, stride 1, size 1 in a parent team of {n} PEs"),
            s("past the parent's last PE"),
        ],
    )?;
    expect_err(
        world.split_strided(0, 1, n + 1),
        "InvalidArgument",
        &[s("past the parent's last PE")],
    )?;
    expect_err(
        world.split_strided(1, usize::MAX, 2),
        "InvalidArgument",
        &[s("past the parent's last PE")],
    )?;
    if n >= 2 {
        expect_err(
            world.split_strided(0, 0, 2),
            "InvalidArgument",
            &[s("stride 0")],
        )?;
    }
    expect_err(
        world.split_2d(0),
        "InvalidArgument",
        &[s("xrange must be at least 1")],
    )?;
    expect_err(
        world.world_pe(n),
        "InvalidPe",
        &[format!("PE {n} does not exist (n_pes = {n}) in this team")],
    )?;
    check_eq!(
        world.translate_pe(n, &world),
        None,
        "translate past the team"
    );
    expect_err(
        world.destroy(),
        "InvalidArgument",
        &[s("TEAM_WORLD is predefined")],
    )?;
    expect_err(
        rt.team_node().destroy(),
        "InvalidArgument",
        &[s("TEAM_NODE is predefined")],
    )?;
    let world = rt.team_world();
    if n >= 2 {
        // The last PE asks for a different size: every PE is told, with the argument.
        let size = if me == n - 1 { 1 } else { n };
        let others = (0..n - 1)
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        expect_err(
            world.split_strided(0, 1, size),
            "TeamMismatch",
            &[
                format!("team PE {others} (world PE {others}) called split_strided(start 0, stride 1, size {n})"),
                format!("team PE {} (world PE {}) called split_strided(start 0, stride 1, size 1) (differs in size)", n - 1, n - 1),
            ],
        )?;
        // A different operation.
        let r = if me == 0 {
            world.split_2d(1).map(|_| ())
        } else {
            world.split_strided(0, 1, n).map(|_| ())
        };
        expect_err(
            r,
            "TeamMismatch",
            &[
                s("team PE 0 (world PE 0) called split_2d(xrange 1);"),
                format!(
                    "called split_strided(start 0, stride 1, size {n}) (differs in the operation)"
                ),
            ],
        )?;
        // A member destroying while another splits.
        let t = world
            .split_strided(0, 1, n)
            .or_fail()?
            .ok_or("whole team")?;
        let r = if me == 0 {
            t.split_strided(0, 1, 1).map(|_| ())
        } else {
            t.split_strided(0, 1, 2).map(|_| ())
        };
        expect_err(
            r,
            "TeamMismatch",
            &[s(
                "team PE 0 (world PE 0) called split_strided(start 0, stride 1, size 1)",
            )],
        )?;
        t.barrier().or_fail()?;
        t.destroy().or_fail()?;
    }
    // After all that, splitting works.
    let t = world
        .split_strided(0, 1, n)
        .or_fail()?
        .ok_or("whole team")?;
    t.barrier().or_fail()?;
    t.destroy().or_fail()?;
    rt.barrier_all().or_fail()
}

/// Run with `SYMMEM_MAX_TEAMS=4`: two teams fit beside TEAM_WORLD and TEAM_NODE; a third is
/// an error on every PE naming the variable; destroying one makes room again.
pub fn team_limit(rt: &Runtime) -> Outcome {
    finish(rt, "team_limit", team_limit_inner(rt))
}

fn team_limit_inner(rt: &Runtime) -> Outcome {
    let n = rt.n_pes();
    check_eq!(rt.max_teams(), 4, "max_teams (SYMMEM_MAX_TEAMS=4)");
    check_eq!(rt.teams_available(), 2, "free slots at start");
    let world = rt.team_world();
    let a = world.split_strided(0, 1, n).or_fail()?.ok_or("team a")?;
    let b = a.split_strided(0, 1, n).or_fail()?.ok_or("team b")?;
    check_eq!(rt.teams_available(), 0, "free slots with two teams");
    let needles = [
        "team_split_strided: no more teams available (SYMMEM_MAX_TEAMS = 4".to_string(),
        "raise SYMMEM_MAX_TEAMS".to_string(),
    ];
    expect_err(world.split_strided(0, 1, n), "TeamLimit", &needles)?;
    expect_err(b.split_strided(0, 1, 1), "TeamLimit", &needles)?;
    expect_err(
        world.split_2d(1),
        "TeamLimit",
        &[s2("team_split_2d: no more teams available")],
    )?;
    // The teams still work after the failed splits.
    a.barrier().or_fail()?;
    b.barrier().or_fail()?;
    b.destroy().or_fail()?;
    check_eq!(rt.teams_available(), 1, "free slots after a destroy");
    let c = world.split_strided(0, 1, n).or_fail()?.ok_or("team c")?;
    c.barrier().or_fail()?;
    c.destroy().or_fail()?;
    a.destroy().or_fail()?;
    check_eq!(rt.teams_available(), 2, "free slots at the end");
    rt.barrier_all().or_fail()
}

fn s2(v: &str) -> String {
    v.to_string()
}

/// Run with `SYMMEM_TIMEOUT=1` on 2 or more PEs: the last PE never calls the split, so the
/// others time out in the split's barrier, each naming the PE its round waits for (some
/// name the missing PE itself) and the variable.
pub fn team_timeout(rt: &Runtime) -> Outcome {
    finish(rt, "team_timeout", team_timeout_inner(rt))
}

fn team_timeout_inner(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    check!(n >= 2, "needs 2 PEs");
    let timed_out = rt.calloc::<u64>(1).or_fail()?;
    if me == n - 1 {
        // Stays out of finalize until the others have timed out: a PE that enters
        // finalize instead is named by same-node partners at once, not timed out.
        // (This wait, too, times out after SYMMEM_TIMEOUT: it waits again then.)
        loop {
            match rt.wait_until(timed_out.at(0), Cmp::Eq, (n - 1) as u64) {
                Ok(_) => return Ok(()),
                Err(symmem::Error::Timeout { .. }) => continue,
                Err(e) => return Err(format!("PE {me}: {e}")),
            }
        }
    }
    let r = rt.team_world().split_strided(0, 1, n);
    if let Err(e) = &r {
        println!("ERROR: PE {me}: {e}");
    }
    rt.atomic_inc(timed_out.at(0), n - 1).or_fail()?;
    expect_err(
        r,
        "Timeout",
        &[
            s2("SYMMEM_TIMEOUT"),
            s2("team_split_strided on PE"),
            s2("of the team's barrier "),
        ],
    )
}
