//! A cluster's maintenance window: the weekly (or daily) four hours, in UTC, in which the
//! service may upgrade it by itself when its owner asked for automatic upgrades.

use chrono::{DateTime, Datelike, Duration, NaiveTime, Timelike, Utc, Weekday};

words! {
    /// The day a window opens on: `any` opens one every day.
    MaintenanceDay {
        Any => "any",
        Monday => "monday",
        Tuesday => "tuesday",
        Wednesday => "wednesday",
        Thursday => "thursday",
        Friday => "friday",
        Saturday => "saturday",
        Sunday => "sunday",
    }
}

impl MaintenanceDay {
    fn admits(self, day: Weekday) -> bool {
        let wanted = match self {
            MaintenanceDay::Any => return true,
            MaintenanceDay::Monday => Weekday::Mon,
            MaintenanceDay::Tuesday => Weekday::Tue,
            MaintenanceDay::Wednesday => Weekday::Wed,
            MaintenanceDay::Thursday => Weekday::Thu,
            MaintenanceDay::Friday => Weekday::Fri,
            MaintenanceDay::Saturday => Weekday::Sat,
            MaintenanceDay::Sunday => Weekday::Sun,
        };
        day == wanted
    }
}

/// How long a window stays open.
pub const WINDOW_HOURS: i64 = 4;

/// `day` and `start_time` (UTC, whole minutes); the window lasts [`WINDOW_HOURS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintenanceWindow {
    pub day: MaintenanceDay,
    pub start_time: NaiveTime,
}

impl Default for MaintenanceWindow {
    /// Any day at midnight UTC, as a cluster created without a window gets.
    fn default() -> Self {
        MaintenanceWindow {
            day: MaintenanceDay::Any,
            start_time: NaiveTime::MIN,
        }
    }
}

/// `HH:MM`, 24-hour, exactly five characters.
pub fn parse_start_time(s: &str) -> Option<NaiveTime> {
    let b = s.as_bytes();
    if b.len() != 5
        || b[2] != b':'
        || !s
            .chars()
            .enumerate()
            .all(|(i, c)| i == 2 || c.is_ascii_digit())
    {
        return None;
    }
    let hours: u32 = s[..2].parse().ok()?;
    let minutes: u32 = s[3..].parse().ok()?;
    NaiveTime::from_hms_opt(hours, minutes, 0)
}

/// The time as `HH:MM`.
pub fn format_start_time(t: NaiveTime) -> String {
    format!("{:02}:{:02}", t.hour(), t.minute())
}

impl MaintenanceWindow {
    /// The start of the window open at `now`, if one is.
    pub fn open_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // A window opened today or yesterday (one opening late in the evening runs past
        // midnight) may be the open one.
        (0..=1)
            .map(|back| self.start_on(now - Duration::days(back)))
            .find(|start| {
                self.day.admits(start.weekday())
                    && *start <= now
                    && now < *start + Duration::hours(WINDOW_HOURS)
            })
    }

    /// The start of the window open at `now`, or else of the next one to open.
    pub fn next_start(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        if let Some(open) = self.open_at(now) {
            return open;
        }
        (0..=7)
            .map(|ahead| self.start_on(now + Duration::days(ahead)))
            .find(|start| *start > now && self.day.admits(start.weekday()))
            // Eight days always hold a matching weekday.
            .unwrap_or(now)
    }

    fn start_on(&self, day: DateTime<Utc>) -> DateTime<Utc> {
        day.date_naive().and_time(self.start_time).and_utc()
    }
}

/// The windows open at an instant, as data a store can select by: a window is open when its
/// day admits `date`'s weekday (`MaintenanceDay::Any` always does) and its start time is
/// within `from..=to`; it then started at `date` + its start time. [`open_windows`] gives at
/// most two (a window of today, one of yesterday still running past midnight), and a window is
/// open at `now` exactly when [`MaintenanceWindow::open_at`] says so (the tests hold them to
/// each other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenWindows {
    pub date: chrono::NaiveDate,
    pub weekday: MaintenanceDay,
    pub from: NaiveTime,
    pub to: NaiveTime,
}

impl OpenWindows {
    pub fn admits(&self, window: &MaintenanceWindow) -> bool {
        (window.day == MaintenanceDay::Any || window.day == self.weekday)
            && self.from <= window.start_time
            && window.start_time <= self.to
    }

    /// When a window this admits started.
    pub fn start_of(&self, window: &MaintenanceWindow) -> DateTime<Utc> {
        self.date.and_time(window.start_time).and_utc()
    }
}

fn day_of(weekday: Weekday) -> MaintenanceDay {
    match weekday {
        Weekday::Mon => MaintenanceDay::Monday,
        Weekday::Tue => MaintenanceDay::Tuesday,
        Weekday::Wed => MaintenanceDay::Wednesday,
        Weekday::Thu => MaintenanceDay::Thursday,
        Weekday::Fri => MaintenanceDay::Friday,
        Weekday::Sat => MaintenanceDay::Saturday,
        Weekday::Sun => MaintenanceDay::Sunday,
    }
}

/// Every window open at `now` (start times are whole minutes; a window is open from its start,
/// inclusive, for [`WINDOW_HOURS`]).
pub fn open_windows(now: DateTime<Utc>) -> Vec<OpenWindows> {
    const LAST_MINUTE: i64 = 24 * 60 - 1;
    (0..=1)
        .filter_map(|back| {
            let date = (now - Duration::days(back)).date_naive();
            let seconds = (now - date.and_time(NaiveTime::MIN).and_utc()).num_seconds();
            // Start minute m is open when m*60 <= seconds < m*60 + the window.
            let to = (seconds.div_euclid(60)).min(LAST_MINUTE);
            let from = ((seconds - WINDOW_HOURS * 3600).div_euclid(60) + 1).max(0);
            let minute = |m: i64| NaiveTime::from_hms_opt((m / 60) as u32, (m % 60) as u32, 0);
            (from <= to).then_some(())?;
            Some(OpenWindows {
                date,
                weekday: day_of(date.weekday()),
                from: minute(from)?,
                to: minute(to)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn window(day: MaintenanceDay, start: &str) -> MaintenanceWindow {
        MaintenanceWindow {
            day,
            start_time: parse_start_time(start).unwrap_or_else(|| panic!("{start}")),
        }
    }

    #[test]
    fn start_times_are_hh_mm_only() {
        assert_eq!(parse_start_time("00:00"), Some(NaiveTime::MIN));
        assert_eq!(
            parse_start_time("23:59").map(format_start_time),
            Some("23:59".into())
        );
        for bad in [
            "24:00", "7:00", "07:60", "07:00:00", "0700", "ab:cd", "+1:00", " 7:00", "",
        ] {
            assert_eq!(parse_start_time(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_weekly_window_opens_on_its_day_for_four_hours() {
        // 2026-11-30 is a Monday.
        let w = window(MaintenanceDay::Monday, "22:00");
        let table = [
            ("2026-11-30T21:59:00Z", None),
            ("2026-11-30T22:00:00Z", Some("2026-11-30T22:00:00Z")),
            // Past midnight, still Monday's window.
            ("2026-12-01T01:59:59Z", Some("2026-11-30T22:00:00Z")),
            ("2026-12-01T02:00:00Z", None),
            ("2026-12-01T22:30:00Z", None),
        ];
        for (now, open) in table {
            assert_eq!(w.open_at(at(now)), open.map(at), "{now}");
        }
        assert_eq!(
            w.next_start(at("2026-12-01T02:00:00Z")),
            at("2026-12-07T22:00:00Z")
        );
        assert_eq!(
            w.next_start(at("2026-11-30T23:00:00Z")),
            at("2026-11-30T22:00:00Z")
        );
    }

    #[test]
    fn an_any_day_window_opens_every_day() {
        let w = window(MaintenanceDay::Any, "03:30");
        assert_eq!(
            w.next_start(at("2026-11-28T08:00:00Z")),
            at("2026-11-29T03:30:00Z")
        );
        assert_eq!(
            w.open_at(at("2026-11-28T07:29:00Z")),
            Some(at("2026-11-28T03:30:00Z"))
        );
        assert_eq!(w.open_at(at("2026-11-28T07:30:00Z")), None);
    }

    #[test]
    fn the_open_windows_are_exactly_those_open_at_says_are_open() {
        let days = [
            MaintenanceDay::Any,
            MaintenanceDay::Monday,
            MaintenanceDay::Tuesday,
            MaintenanceDay::Sunday,
        ];
        // Instants across a Monday and the midnights around it, every 13 minutes and 7 s.
        let mut now = at("2026-11-29T20:00:00Z");
        while now < at("2026-12-01T04:00:00Z") {
            let open = open_windows(now);
            assert!(open.len() <= 2);
            for day in days {
                for minute in (0..24 * 60).step_by(11) {
                    let w = MaintenanceWindow {
                        day,
                        start_time: NaiveTime::from_hms_opt(minute / 60, minute % 60, 0)
                            .unwrap_or_default(),
                    };
                    let by_data = open.iter().find(|o| o.admits(&w)).map(|o| o.start_of(&w));
                    assert_eq!(by_data, w.open_at(now), "{w:?} at {now}");
                }
            }
            now += Duration::seconds(13 * 60 + 7);
        }
    }
}
