//! DevTestLab schedules (Microsoft.DevTestLab 2018-09-15), used for VM auto-shutdown: a
//! schedule named `shutdown-computevm-{vm}` in the VM's resource group with task type
//! `ComputeVmShutdownTask`.

use serde::{Deserialize, Serialize};

use super::common::Tags;

/// A schedule (`Schedule`); `properties` is required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Region (the VM's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Properties.
    pub properties: ScheduleProperties,
}

/// `ScheduleProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleProperties {
    /// Enabled or Disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EnableStatus>,
    /// `ComputeVmShutdownTask` for auto-shutdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    /// Days and time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weekly_recurrence: Option<WeekDetails>,
    /// Time of day, `HHmm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_recurrence: Option<DayDetails>,
    /// Minute of every hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hourly_recurrence: Option<HourDetails>,
    /// Windows time zone id, e.g. `UTC`, `W. Europe Standard Time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone_id: Option<String>,
    /// Notification before shutdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification_settings: Option<NotificationSettings>,
    /// The VM's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_resource_id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub created_date: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub unique_identifier: Option<String>,
}

/// `EnableStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnableStatus {
    /// On.
    Enabled,
    /// Off.
    Disabled,
}

/// `DayDetails`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DayDetails {
    /// `HHmm`, e.g. `1900`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// `WeekDetails`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WeekDetails {
    /// Day names, e.g. `Monday`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weekdays: Option<Vec<String>>,
    /// `HHmm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// `HourDetails`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HourDetails {
    /// Minute of the hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minute: Option<i32>,
}

/// `NotificationSettings`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationSettings {
    /// Enabled or Disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EnableStatus>,
    /// Minutes of warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_in_minutes: Option<i32>,
    /// Webhook to call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// Address to mail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_recipient: Option<String>,
    /// e.g. `en`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification_locale: Option<String>,
}

impl Schedule {
    /// The auto-shutdown schedule of the VM `vm_id`: daily at `time_hhmm` in `time_zone_id`,
    /// without notification (the body arm.md gives).
    pub fn vm_auto_shutdown(
        location: impl Into<String>,
        vm_id: &str,
        time_hhmm: &str,
        time_zone_id: &str,
        tags: Option<Tags>,
    ) -> Self {
        Self {
            id: None,
            name: None,
            kind: None,
            location: Some(location.into()),
            tags,
            properties: ScheduleProperties {
                status: Some(EnableStatus::Enabled),
                task_type: Some("ComputeVmShutdownTask".into()),
                daily_recurrence: Some(DayDetails {
                    time: Some(time_hhmm.to_string()),
                }),
                time_zone_id: Some(time_zone_id.to_string()),
                target_resource_id: Some(vm_id.to_string()),
                notification_settings: Some(NotificationSettings {
                    status: Some(EnableStatus::Disabled),
                    time_in_minutes: Some(30),
                    ..NotificationSettings::default()
                }),
                ..ScheduleProperties::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};
    use serde_json::json;

    const DIR: &str =
        "devtestlabs/resource-manager/Microsoft.DevTestLab/stable/2018-09-15/examples/";

    #[test]
    fn weekly_schedule_matches_the_spec_example() {
        let schedule = Schedule {
            id: None,
            name: None,
            kind: None,
            location: None,
            tags: None,
            properties: ScheduleProperties {
                status: Some(EnableStatus::Enabled),
                time_zone_id: Some("Hawaiian Standard Time".into()),
                task_type: Some("LabVmsStartupTask".into()),
                weekly_recurrence: Some(WeekDetails {
                    time: Some("0700".into()),
                    weekdays: Some(
                        [
                            "Monday",
                            "Tuesday",
                            "Wednesday",
                            "Thursday",
                            "Friday",
                            "Saturday",
                        ]
                        .map(String::from)
                        .to_vec(),
                    ),
                }),
                ..ScheduleProperties::default()
            },
        };
        assert_eq!(
            serde_json::to_value(&schedule).expect("serialises"),
            request_body(
                &format!("{DIR}GlobalSchedules_CreateOrUpdate.json"),
                "schedule"
            )
        );
        let back: Schedule = serde_json::from_value(response_body(
            &format!("{DIR}GlobalSchedules_CreateOrUpdate.json"),
            "200",
        ))
        .expect("the example response reads");
        assert!(back.properties.provisioning_state.is_some());
    }

    #[test]
    fn auto_shutdown_body_is_the_documented_one() {
        let body = Schedule::vm_auto_shutdown(
            "eastus",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/gpu",
            "1900",
            "UTC",
            None,
        );
        assert_eq!(
            serde_json::to_value(&body).expect("serialises"),
            json!({"location":"eastus","properties":{"status":"Enabled","taskType":"ComputeVmShutdownTask",
                "dailyRecurrence":{"time":"1900"},"timeZoneId":"UTC",
                "targetResourceId":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/gpu",
                "notificationSettings":{"status":"Disabled","timeInMinutes":30}}})
        );
    }
}
